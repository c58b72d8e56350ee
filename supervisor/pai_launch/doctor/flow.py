"""The script as the calls it makes, in the order one process makes them, without running it.

The walk starts at the module's top level and steps into the script's own functions where they are called (defs,
nested defs, lambdas, and callables handed to other calls: `in_turn(lambda: ...)`, `mp.spawn(worker)`), a few levels
deep. An import of one of the project's own files (doctor.project) walks that file's top level where the import
stands, and a call into one of its functions is walked like a call into the script's own. Each call becomes an
Event that remembers the ifs and loops around it and what the names meant there, which is what the protocol checks
read. Functions never reached that way are walked afterwards, on their own (their events are `detached`: nothing
says when, or whether, they run). A call of a function that ends in sys.exit() ends the branch like sys.exit()
itself, and a test whose branch made the DDP ranks exit says "not a DDP rank" where it is tested again.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from pai_launch.doctor import names
from pai_launch.doctor.env import Binding, Env, Source, argparse_defaults, bind_call, candidates, function_of, name_in
from pai_launch.doctor.guards import NOTHING, Meaning, is_script_main, is_turn, meaning
from pai_launch.doctor.model import Unresolved
from pai_launch.doctor.project import Module, Project

MAX_DEPTH = 6
MAX_IMPORTS = 5  # files imported from files imported from ... the script
MAX_UNRESOLVED = 8
MARKER = ".training_complete"
EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


@dataclass(frozen=True)
class Guard:
    node: ast.AST
    positive: bool
    meaning: Meaning
    leaves: bool = False  # the code after `if TEST: return/exit`: it runs whenever the script goes on


@dataclass(frozen=True)
class Event:
    """One thing the script does: kind "call" (name: dotted callee), "marker" (writes .training_complete),
    "break", "return", "exit" (raise SystemExit), "assign" (name: the attribute assigned) or "unwrap" (`NAME =
    X.module`; name: the name assigned)."""

    order: int
    kind: str
    name: str | None
    node: ast.AST
    guards: tuple[Guard, ...]
    loops: tuple[ast.AST, ...]
    serialized: bool
    depth: int
    env: Env
    detached: bool = False

    @property
    def line(self) -> int:
        return getattr(self.node, "lineno", 0)

    @property
    def path(self) -> str | None:
        """The file the event is in, as the report shows it."""
        source = self.env.file()
        return source.path if source is not None else None

    @property
    def mode(self) -> Meaning:
        total = NOTHING
        for guard in self.guards:
            total = total.plus(guard.meaning)
        return total

    def surely_reached(self, also=lambda guard: False) -> bool:
        """Whether doctor reads every condition on the way here (or `also` accepts it), so that a finding about
        this event is certain: not in a function walked on its own, and each if's test understood."""
        return not self.detached and all(g.meaning != NOTHING or g.leaves or also(g)
                                         or (g.positive and is_script_main(g.node.test)) for g in self.guards)

    def under(self, node: ast.AST) -> bool:
        return any(guard.node is node and guard.positive for guard in self.guards)

    def is_exit(self) -> bool:
        """sys.exit() and the like, raise SystemExit, or a return from the function the module calls (main)."""
        return self.kind == "exit" or (self.kind == "call" and names.is_exit(self.name)) \
            or (self.kind == "return" and self.depth == 1)


@dataclass(frozen=True)
class Ctx:
    guards: tuple[Guard, ...] = ()
    loops: tuple[ast.AST, ...] = ()
    serialized: bool = False
    stack: tuple[ast.AST, ...] = ()
    imports: tuple[Module, ...] = ()
    detached: bool = False
    implied: tuple[tuple[str, Meaning], ...] = ()  # an if's test -> what it implies here (_implied)


@dataclass
class Flow:
    """The walk's result: the events in order, the files read, every import (local name -> dotted, all files), the
    argparse options (dest -> default), the string constants, and the calls it could not see into."""

    modules: list[Module]
    imports: dict[str, str]
    events: list[Event] = field(default_factory=list)
    options: dict[str, object] = field(default_factory=dict)
    strings: set[str] = field(default_factory=set)
    unresolved: list[Unresolved] = field(default_factory=list)

    def name_of(self, expr: ast.AST, env: Env | None = None) -> str | None:
        """The dotted name of `expr`, with the imports of the file `env` belongs to (the entry script's without)."""
        return name_in(expr, env) if env is not None else names.dotted(expr, self.modules[0].imports)

    def calls(self, predicate) -> list[Event]:
        return [e for e in self.events if e.kind == "call" and predicate(e.name)]

    def taken_in_turn(self, event: Event) -> bool:
        """Whether the ranks make this call one at a time: through in_turn, or in a loop over the ranks whose
        every turn ends in a barrier (`for r in range(world): if r == rank: ...; dist.barrier()`)."""
        if event.serialized:
            return True
        barriers = self.calls(names.is_barrier)
        for loop in event.loops:
            inside = {id(node) for node in ast.walk(loop)}
            turns = {id(g.node) for g in event.guards
                     if id(g.node) in inside and g.positive and is_turn(g.node.test, event.env)}
            for barrier in barriers:
                if turns and loop in barrier.loops and not turns & {id(g.node) for g in barrier.guards}:
                    return True
        return False

    def is_ddp(self) -> bool:
        """Whether the script runs as DDP ranks: it wraps in DistributedDataParallel or starts a process group."""
        return bool(self.calls(lambda n: names.is_ddp(n) or names.is_dist(n, "init_process_group")
                               or names.is_training(n, "wrap_ddp") or names.is_training(n, "start")))


def _terminates(body: list[ast.stmt], env: Env) -> bool:
    last = body[-1] if body else None
    return isinstance(last, EXITS) or _exits(last, env)


def _exits(stmt: ast.stmt | None, env: Env | None, depth: int = 0) -> bool:
    """Whether a statement ends the process: sys.exit() and the like, raise, or a call of a function of the
    script's (or the project's) whose last statement does (`exit_distributed()`)."""
    if isinstance(stmt, ast.Raise):
        return depth > 0
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    if names.is_exit(name_in(stmt.value.func, env)):
        return True
    found = function_of(stmt.value.func, env) if depth < 3 else None
    return found is not None and isinstance(found[0], (ast.FunctionDef, ast.AsyncFunctionDef)) \
        and bool(found[0].body) and _exits(found[0].body[-1], found[1], depth + 1)


def _implied(stmt: ast.If, env: Env) -> tuple[str, Meaning] | None:
    """`if T: ... if args.distributed: exit()`: where T holds again later, the process is not a DDP rank (it would
    have exited). (the test, what it then implies), or None."""
    for inner in stmt.body:
        if isinstance(inner, ast.If) and _terminates(inner.body, env):
            held = meaning(inner.test, True, env)
            flipped = Meaning(*(None if v is None else not v for v in (held.init, held.dist, held.rank0)))
            if flipped != NOTHING:
                return ast.dump(stmt.test), flipped
    return None


def _after_leaving(stmt: ast.If, env: Env) -> Guard | None:
    """What holds after an if/elif/else chain some of whose branches return or exit: what the branches that go on
    have in common (`if "RANK" in os.environ: ... elif "SLURM_PROCID" in os.environ: ... else: return` leaves only
    launched ranks), or None when no branch leaves."""
    survivors, branches, before, node = [], 0, NOTHING, stmt
    while True:
        branches += 1
        if not _terminates(node.body, env):
            survivors.append(before.plus(meaning(node.test, True, env)))
        before = before.plus(meaning(node.test, False, env))
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            continue
        branches += 1
        if not (node.orelse and _terminates(node.orelse, env)):
            survivors.append(before)
        break
    if len(survivors) == branches:
        return None
    common = [{getattr(m, field) for m in survivors} for field in ("init", "dist", "rank0")]
    held = Meaning(*(values.pop() if len(values) == 1 else None for values in common))
    return Guard(stmt, False, held, True)


class _Walker:
    def __init__(self, flow: Flow, project: Project):
        self.flow = flow
        self.project = project
        self.visited: set[ast.AST] = set()
        self.scopes: dict[object, Env] = {}  # module path -> its module scope, once its top level was walked
        self.done = False

    # files ------------------------------------------------------------------------------------------------------
    def module_scope(self, module: Module) -> Env:
        env = Env(source=Source(module.shown, module.imports, self.follow))
        for stmt in module.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                env.names[stmt.name] = Binding(stmt, env)
        return env

    def run_module(self, module: Module, ctx: Ctx) -> Env:
        """Walk a project file's top level (as its import runs it), once; a cycle or too deep an import is skipped."""
        if module.path in self.scopes or module in ctx.imports or len(ctx.imports) >= MAX_IMPORTS:
            return self.scopes.get(module.path) or self.module_scope(module)
        env = self.module_scope(module)
        self.scopes[module.path] = env
        if module not in self.flow.modules:
            self.flow.modules.append(module)
        self.block(module.tree.body, replace(ctx, imports=ctx.imports + (module,), stack=()), env)
        return env

    def follow(self, dotted: str | None) -> tuple[ast.AST, Env] | None:
        """The project's def that a dotted name reaches, with its file's module scope."""
        found = self.project.function(dotted)
        if found is None:
            return None
        function, module = found
        scope = self.scopes.get(module.path)
        if scope is None:
            scope = self.module_scope(module) if self.done else self.run_module(module, Ctx())
        return function, scope

    def imported(self, stmt: ast.Import | ast.ImportFrom, ctx: Ctx, env: Env) -> None:
        """An import of the project's own files runs their top level here (`import a.b` runs a, then a.b)."""
        if isinstance(stmt, ast.ImportFrom) and stmt.level > 0:  # doctor.project named what it reaches
            source = env.file()
            reached = [source.imports.get(alias.asname or alias.name, "") for alias in stmt.names] if source else []
            modules = [self.project.by_name.get(name) for full in reached for name in (full.rsplit(".", 1)[0], full)]
        else:
            dotted = [alias.name for alias in stmt.names] if isinstance(stmt, ast.Import) else \
                [stmt.module] + [f"{stmt.module}.{alias.name}" for alias in stmt.names] if stmt.module else []
            modules = [self.project.find(".".join(name.split(".")[:cut]))
                       for name in dotted for cut in range(1, name.count(".") + 2)]
        for module in dict.fromkeys(m for m in modules if m is not None):
            self.run_module(module, ctx)

    def note_unresolved(self, name: str | None, node: ast.AST, env: Env) -> None:
        source = env.file()
        if source is None or len(self.flow.unresolved) >= MAX_UNRESOLVED:
            return
        why = self.project.why_unresolved(name, source.imports)
        if why is None:
            return
        if any(u.why == why for u in self.flow.unresolved):
            return
        call = ast.unparse(node.func) if isinstance(node, ast.Call) else name
        self.flow.unresolved.append(Unresolved(call, source.path, getattr(node, "lineno", None), why))

    # statements -------------------------------------------------------------------------------------------------
    def block(self, body: list[ast.stmt], ctx: Ctx, env: Env) -> Env:
        for stmt in body:
            env = self.statement(stmt, ctx, env)
            after = _after_leaving(stmt, env) if isinstance(stmt, ast.If) else None
            if after is not None:
                ctx = replace(ctx, guards=ctx.guards + (after,))
            implied = _implied(stmt, env) if isinstance(stmt, ast.If) else None
            if implied is not None:
                ctx = replace(ctx, implied=ctx.implied + (implied,))
        return env

    def statement(self, stmt: ast.stmt, ctx: Ctx, env: Env) -> Env:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            env.names[stmt.name] = Binding(stmt, env)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.imported(stmt, ctx, env)
        elif isinstance(stmt, ast.Expr):
            self.expr(stmt.value, ctx, env)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self.expr(stmt.value, ctx, env)
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Attribute) and stmt.value.attr == "module" \
                    and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.emit("unwrap", stmt.targets[0].id, stmt, ctx, env)  # model = model.module
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                self.bind(target, stmt.value, ctx, env, augmented=isinstance(stmt, ast.AugAssign))
        elif isinstance(stmt, ast.If):
            return self.branch(stmt, ctx, env)
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            self.expr(stmt.iter if isinstance(stmt, (ast.For, ast.AsyncFor)) else stmt.test, ctx, env)
            if not isinstance(stmt, ast.While):
                self.bind(stmt.target, None, ctx, env)
                if isinstance(stmt.target, ast.Name) and isinstance(stmt.iter, (ast.Tuple, ast.List)):
                    env.names[stmt.target.id] = Binding(None, alts=tuple(Binding(e, env) for e in stmt.iter.elts))
            env = self.block(stmt.body, replace(ctx, loops=ctx.loops + (stmt,)), env)
            env = self.block(stmt.orelse, ctx, env)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.expr(item.context_expr, ctx, env)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, None, ctx, env)
            env = self.block(stmt.body, ctx, env)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            env = self.block(stmt.body, ctx, env)
            for handler in stmt.handlers:
                env = self.block(handler.body, ctx, env)
            env = self.block(stmt.orelse, ctx, env)
            env = self.block(stmt.finalbody, ctx, env)
        elif isinstance(stmt, ast.Match):
            self.expr(stmt.subject, ctx, env)
            for case in stmt.cases:
                env = self.block(case.body, ctx, env)
        elif isinstance(stmt, ast.Return):
            self.expr(stmt.value, ctx, env)
            self.emit("return", None, stmt, ctx, env)
        elif isinstance(stmt, ast.Raise):
            self.expr(stmt.exc, ctx, env)
            exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            if isinstance(exc, ast.Name) and exc.id == "SystemExit":
                self.emit("exit", "SystemExit", stmt, ctx, env)
        elif isinstance(stmt, ast.Break):
            self.emit("break", None, stmt, ctx, env)
        return env

    def branch(self, stmt: ast.If, ctx: Ctx, env: Env) -> Env:
        self.expr(stmt.test, ctx, env)
        test = ast.dump(stmt.test)
        also = [held for implied_test, held in ctx.implied if implied_test == test]
        yes = Guard(stmt, True, meaning(stmt.test, True, env).plus(also[-1] if also else NOTHING))
        no = Guard(stmt, False, meaning(stmt.test, False, env))
        after_yes = self.block(stmt.body, replace(ctx, guards=ctx.guards + (yes,)), env.copy())
        after_no = self.block(stmt.orelse, replace(ctx, guards=ctx.guards + (no,)), env.copy())
        if _terminates(stmt.body, env):
            return after_no
        if stmt.orelse and _terminates(stmt.orelse, env):
            return after_yes
        return after_yes.merge(after_no)

    def bind(self, target: ast.AST, value: ast.AST | None, ctx: Ctx, env: Env, augmented: bool = False) -> None:
        if isinstance(target, ast.Name):
            env.names[target.id] = Binding(None if augmented else value, env, when=ctx.guards)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Name):
                    env.names[element.id] = Binding(value, env, index=index, when=ctx.guards)
        elif isinstance(target, ast.Attribute):
            self.emit("assign", name_in(target, env), target, ctx, env)

    # expressions ------------------------------------------------------------------------------------------------
    def expr(self, node: ast.AST | None, ctx: Ctx, env: Env) -> None:
        if node is None or isinstance(node, ast.Lambda):
            return  # a lambda's body runs only when it is called
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                self.expr(node.func.value, ctx, env)
            elif not isinstance(node.func, ast.Name):
                self.expr(node.func, ctx, env)
            for arg in node.args:
                self.expr(arg, ctx, env)
            for keyword in node.keywords:
                self.expr(keyword.value, ctx, env)
            self.call(node, ctx, env)
            return
        for child in ast.iter_child_nodes(node):
            self.expr(child, ctx, env)

    def call(self, node: ast.Call, ctx: Ctx, env: Env) -> None:
        local = function_of(node.func, env)
        if local is not None:
            self.emit("call", getattr(local[0], "name", "<lambda>"), node, ctx, env)
            self.enter(local, node.args, node.keywords, ctx, env)
            return
        name = name_in(node.func, env)
        held = [name_in(value, scope) for value, scope in candidates(node.func, env)
                if value is not node.func and isinstance(value, (ast.Name, ast.Attribute))]
        if not held:
            self.note_unresolved(name, node, env)
        if isinstance(node.func, ast.Name) and held:  # a name holding a callable: end(run) with end=pt.end_generation
            name = held[0]
            for other in held[1:]:
                self.emit("call", other, node, ctx, env)
        self.emit("call", name, node, ctx, env)
        if self.writes_marker(node, name, env):
            self.emit("marker", name, node, ctx, env)
        serial = names.is_training(name, "in_turn")
        for arg in node.args + [k.value for k in node.keywords]:
            handed = function_of(arg, env)
            if handed is not None:  # a callable handed to code we cannot see into: assume it is called there
                self.enter(handed, [], [], replace(ctx, serialized=ctx.serialized or serial), env)

    def enter(self, local, args, keywords, ctx: Ctx, env: Env) -> None:
        function, closure = local
        if function in ctx.stack or len(ctx.stack) >= MAX_DEPTH:
            return
        self.visited.add(function)
        scope = bind_call(function, list(args), list(keywords), env, closure)
        inner = replace(ctx, stack=ctx.stack + (function,))
        if isinstance(function, ast.Lambda):
            self.expr(function.body, inner, scope)
        else:
            self.block(function.body, inner, scope)

    def writes_marker(self, node: ast.Call, name: str | None, env: Env) -> bool:
        last = names.tail(name)
        if last == "open":
            mode = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "mode"), None)
            if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax")):
                return False
            return bool(node.args) and self.mentions_marker(node.args[0], env)
        if last in ("touch", "write_text", "write_bytes") and isinstance(node.func, ast.Attribute):
            return self.mentions_marker(node.func.value, env)
        if last in ("replace", "rename", "move", "copy", "copyfile") and len(node.args) > 1:
            return self.mentions_marker(node.args[1], env)
        return False

    def mentions_marker(self, expr: ast.AST, env: Env | None, depth: int = 0) -> bool:
        for node in ast.walk(expr):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and MARKER in node.value:
                return True
            if isinstance(node, ast.Name) and depth < 4:
                for value, scope in candidates(node, env):
                    if value is not node and self.mentions_marker(value, scope, depth + 1):
                        return True
        return False

    def emit(self, kind: str, name: str | None, node: ast.AST, ctx: Ctx, env: Env) -> None:
        self.flow.events.append(Event(len(self.flow.events), kind, name, node, ctx.guards, ctx.loops,
                                      ctx.serialized, len(ctx.stack), env.snapshot(), ctx.detached))


def walk(project: Project) -> Flow:
    """The events of one process running the script (and the project files it imports), top level first, then
    functions nothing reached."""
    flow = Flow([], {})
    walker = _Walker(flow, project)
    walker.run_module(project.entry, Ctx())
    walker.done = True
    for module in list(flow.modules):
        scope = walker.scopes[module.path]
        for stmt in module.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt not in walker.visited:
                walker.enter((stmt, scope), [], [], Ctx(detached=True), scope)
    for module in flow.modules:
        flow.imports.update(module.imports)
        flow.options.update(argparse_defaults(module.tree))
        flow.strings |= {n.value for n in ast.walk(module.tree) if isinstance(n, ast.Constant)
                         and isinstance(n.value, str)}
    return flow
