"""How the walk reads each kind of statement: a block one statement after another, an if's two branches and what
they leave for the code after them, loops, with, try, match, assignments (which bind names) and the statements that
leave (return, raise SystemExit, break). One method each, found through STATEMENTS; the files, calls and
expressions they lead to are doctor.walker's.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from pai_launch.doctor.api import name_in, remember_attribute
from pai_launch.doctor.branches import after_leaving, implied, terminates
from pai_launch.doctor.decided import truth
from pai_launch.doctor.env import Binding, Env
from pai_launch.doctor.flow import Guard
from pai_launch.doctor.guards import NOTHING, Meaning, meaning
from pai_launch.doctor.project import Module


@dataclass(frozen=True)
class Ctx:
    """Where the walk stands: the ifs and loops around it, the calls and imports it is inside."""

    guards: tuple[Guard, ...] = ()
    loops: tuple[ast.AST, ...] = ()
    serialized: bool = False
    stack: tuple[ast.AST, ...] = ()
    imports: tuple[Module, ...] = ()
    detached: bool = False
    implied: tuple[tuple[str, Meaning], ...] = ()  # an if's test -> what it implies here (branches.implied)
    dead: bool = False  # code that never runs (doctor.decided): walked only so that its functions count as reached


class StatementWalk:
    """The walker's statements, kept apart from its files and calls; they use its expr, imported and emit."""

    decisions: dict[int, bool | None]  # id(if) -> what decides it (StatementWalk.decision)

    def block(self, body: list[ast.stmt], ctx: Ctx, env: Env) -> Env:
        for index, stmt in enumerate(body):
            env = self.statement(stmt, ctx, env)
            if ctx.dead:
                continue
            if self.stops(stmt, env):
                self.block(body[index + 1:], replace(ctx, dead=True), env.copy())
                break
            if self.decision(stmt, ctx, env) is not None:
                continue  # the branch that runs binds its names; the other one leaves nothing for the code after
            after = after_leaving(stmt, env) if isinstance(stmt, ast.If) else None
            if after is not None:
                ctx = replace(ctx, guards=ctx.guards + (after,))
            implication = implied(stmt, env) if isinstance(stmt, ast.If) else None
            if implication is not None:
                ctx = replace(ctx, implied=ctx.implied + (implication,))
        return env

    def stops(self, stmt: ast.stmt, env: Env) -> bool:
        """Whether nothing after the statement in its block runs: return, raise, continue, break, sys.exit() (while
        no file read replaces the exits), or an if a constant decides whose branch that runs stops."""
        if isinstance(stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
            return True
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            return name_in(stmt.value.func, env) in EXITS and not self.exits_replaced()
        held = self.decisions.get(id(stmt)) if isinstance(stmt, ast.If) else None
        return held is not None and any(self.stops(inner, env) for inner in (stmt.body if held else stmt.orelse))

    def exits_replaced(self) -> bool:
        """Whether some file read may replace sys.exit or exit (then an exit call may return)."""
        return False

    def decision(self, stmt: ast.stmt, ctx: Ctx, env: Env) -> bool | None:
        """True or False for an if whose test a constant decides (doctor.decided), else None; read once per if."""
        if not isinstance(stmt, ast.If):
            return None
        if id(stmt) not in self.decisions:
            scope = ctx.stack[-1] if ctx.stack else ctx.imports[-1].tree if ctx.imports else None
            self.decisions[id(stmt)] = None if scope is None else truth(stmt.test, stmt, scope, env)
        return self.decisions[id(stmt)]

    def statement(self, stmt: ast.stmt, ctx: Ctx, env: Env) -> Env:
        """What the statement does, in the env it leaves (an if's branches may bind names differently)."""
        handler = STATEMENTS.get(type(stmt))
        return env if handler is None else handler(self, stmt, ctx, env)

    def define(self, stmt: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, ctx: Ctx, env: Env) -> Env:
        env.names[stmt.name] = Binding(stmt, env)
        return env

    def import_(self, stmt: ast.Import | ast.ImportFrom, ctx: Ctx, env: Env) -> Env:
        if not ctx.dead:
            self.imported(stmt, ctx, env)
        return env

    def expression(self, stmt: ast.Expr, ctx: Ctx, env: Env) -> Env:
        self.expr(stmt.value, ctx, env)
        return env

    def assign(self, stmt: ast.Assign | ast.AnnAssign | ast.AugAssign, ctx: Ctx, env: Env) -> Env:
        self.expr(stmt.value, ctx, env)
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Attribute) and stmt.value.attr == "module" \
                and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            self.emit("unwrap", stmt.targets[0].id, stmt, ctx, env)  # model = model.module
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            self.bind(target, stmt.value, ctx, env, augmented=isinstance(stmt, ast.AugAssign))
        return env

    def loop(self, stmt: ast.For | ast.AsyncFor | ast.While, ctx: Ctx, env: Env) -> Env:
        self.expr(stmt.iter if isinstance(stmt, (ast.For, ast.AsyncFor)) else stmt.test, ctx, env)
        if not isinstance(stmt, ast.While):
            self.bind(stmt.target, None, ctx, env)
            if isinstance(stmt.target, ast.Name) and isinstance(stmt.iter, (ast.Tuple, ast.List)):
                env.names[stmt.target.id] = Binding(None, alts=tuple(Binding(e, env) for e in stmt.iter.elts))
        env = self.block(stmt.body, replace(ctx, loops=ctx.loops + (stmt,)), env)
        return self.block(stmt.orelse, ctx, env)

    def with_(self, stmt: ast.With | ast.AsyncWith, ctx: Ctx, env: Env) -> Env:
        for item in stmt.items:
            self.expr(item.context_expr, ctx, env)
            if item.optional_vars is not None:
                self.bind(item.optional_vars, None, ctx, env)
        return self.block(stmt.body, ctx, env)

    def try_(self, stmt: ast.Try, ctx: Ctx, env: Env) -> Env:
        """The body, each handler, else and finally, one after the other (as if each ran)."""
        env = self.block(stmt.body, ctx, env)
        for handler in stmt.handlers:
            env = self.block(handler.body, ctx, env)
        env = self.block(stmt.orelse, ctx, env)
        return self.block(stmt.finalbody, ctx, env)

    def match(self, stmt: ast.Match, ctx: Ctx, env: Env) -> Env:
        self.expr(stmt.subject, ctx, env)
        for case in stmt.cases:
            env = self.block(case.body, ctx, env)
        return env

    def return_(self, stmt: ast.Return, ctx: Ctx, env: Env) -> Env:
        self.expr(stmt.value, ctx, env)
        if not (stmt.value is not None and self.hands_back(ctx)):
            self.emit("return", None, stmt, ctx, env)
        return env

    def hands_back(self, ctx: Ctx) -> bool:
        """Whether a return here gives a value to code that goes on (a helper's), not the end of the script."""
        return False

    def raise_(self, stmt: ast.Raise, ctx: Ctx, env: Env) -> Env:
        self.expr(stmt.exc, ctx, env)
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        if isinstance(exc, ast.Name) and exc.id == "SystemExit":
            self.emit("exit", "SystemExit", stmt, ctx, env)
        return env

    def break_(self, stmt: ast.Break, ctx: Ctx, env: Env) -> Env:
        self.emit("break", None, stmt, ctx, env)
        return env

    def branch(self, stmt: ast.If, ctx: Ctx, env: Env) -> Env:
        self.expr(stmt.test, ctx, env)
        held = None if ctx.dead else self.decision(stmt, ctx, env)
        if held is not None:  # only one branch runs, always: no guard, the other branch is dead
            self.block(stmt.orelse if held else stmt.body, replace(ctx, dead=True), env.copy())
            return self.block(stmt.body if held else stmt.orelse, ctx, env.copy())
        test = ast.dump(stmt.test)
        also = [held for implied_test, held in ctx.implied if implied_test == test]
        yes = Guard(stmt, True, meaning(stmt.test, True, env).plus(also[-1] if also else NOTHING))
        no = Guard(stmt, False, meaning(stmt.test, False, env))
        after_yes = self.block(stmt.body, replace(ctx, guards=ctx.guards + (yes,)), env.copy())
        after_no = self.block(stmt.orelse, replace(ctx, guards=ctx.guards + (no,)), env.copy())
        if terminates(stmt.body, env):
            return after_no
        if stmt.orelse and terminates(stmt.orelse, env):
            return after_yes
        return after_yes.merge(after_no)

    def bind(self, target: ast.AST, value: ast.AST | None, ctx: Ctx, env: Env, augmented: bool = False) -> None:
        if isinstance(target, ast.Name):
            env.names[target.id] = Binding(None if augmented else value, env, when=ctx.guards)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Name):
                    env.names[element.id] = Binding(value, env, index=index, when=ctx.guards)
                elif isinstance(element, ast.Attribute):
                    self.hold(element, Binding(value, env, index=index, when=ctx.guards), env)
        elif isinstance(target, ast.Attribute):
            self.emit("assign", name_in(target, env), target, ctx, env)
            if not ctx.dead:
                remember_attribute(target, value, env)
                self.hold(target, Binding(None if augmented else value, env, when=ctx.guards), env)

    def hold(self, target: ast.Attribute, binding: Binding, env: Env) -> None:
        """`X.attr = value`: bound where X is an instance the walk knows (doctor.classes); else nothing."""


#: the calls that end the process (pai_launch.training's helpers may not: names.is_exit)
EXITS = ("sys.exit", "exit", "quit", "os._exit")

#: Each statement the walk reads and the StatementWalk method that reads it (any other is passed over).
STATEMENTS = {
    ast.FunctionDef: StatementWalk.define, ast.AsyncFunctionDef: StatementWalk.define,
    ast.ClassDef: StatementWalk.define,
    ast.Import: StatementWalk.import_, ast.ImportFrom: StatementWalk.import_,
    ast.Expr: StatementWalk.expression,
    ast.Assign: StatementWalk.assign, ast.AnnAssign: StatementWalk.assign, ast.AugAssign: StatementWalk.assign,
    ast.If: StatementWalk.branch,
    ast.For: StatementWalk.loop, ast.AsyncFor: StatementWalk.loop, ast.While: StatementWalk.loop,
    ast.With: StatementWalk.with_, ast.AsyncWith: StatementWalk.with_,
    ast.Try: StatementWalk.try_, getattr(ast, "TryStar", ast.Try): StatementWalk.try_,  # except* (Python 3.11)
    ast.Match: StatementWalk.match,
    ast.Return: StatementWalk.return_, ast.Raise: StatementWalk.raise_, ast.Break: StatementWalk.break_,
}
