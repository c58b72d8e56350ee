"""The script as the calls it makes, in the order one process makes them, without running it.

The walk starts at the module's top level and steps into the script's own functions where they are called (defs,
nested defs, lambdas, and callables handed to other calls: `in_turn(lambda: ...)`, `mp.spawn(worker)`), a few levels
deep. An import of one of the project's own files (doctor.project) walks that file's top level where the import
stands, and a call into one of its functions is walked like a call into the script's own. Each call becomes an
Event that remembers the ifs and loops around it and what the names meant there, which is what the protocol checks
read. Functions never reached that way are walked afterwards, on their own (their events are `detached`: nothing
says when, or whether, they run). Here: the files, the calls and expressions; each kind of statement is
doctor.statements', what an if's branches leave for the code after them doctor.branches', the project's classes
(instances, their methods and attributes) doctor.classes'.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from pai_launch.doctor import names
from pai_launch.doctor.api import name_in
from pai_launch.doctor.classes import ClassWalk, Instances
from pai_launch.doctor.env import Binding, Env, Source, argparse_defaults, bind_call, candidates, function_of
from pai_launch.doctor.flow import Event, Flow
from pai_launch.doctor.marker import writes_marker
from pai_launch.doctor.model import Unresolved
from pai_launch.doctor.project import Module, Project
from pai_launch.doctor.statements import Ctx, StatementWalk

MAX_DEPTH = 6
MAX_IMPORTS = 5  # files imported from files imported from ... the script
MAX_UNRESOLVED = 8
EXIT_NAMES = ("exit", "quit", "_exit")


class _Walker(ClassWalk, StatementWalk):
    """One walk of a project: the files it has run, the functions it has entered, and the Flow it fills."""

    def __init__(self, flow: Flow, project: Project):
        self.flow = flow
        self.project = project
        self.visited: set[ast.AST] = set()
        self.scopes: dict[object, Env] = {}  # module path -> its module scope, once its top level was walked
        self.done = False
        self.bare: set[int] = set()  # calls whose value nothing uses: `main()`, `sys.exit(main())`
        self.giving: list[bool] = []  # per function entered: whether its caller uses the value it returns
        self.decisions: dict[int, bool | None] = {}
        self.replaced: dict[int, bool] = {}  # id(module) -> whether it may replace an exit
        self.instances = Instances()  # the project classes' instances made (doctor.classes)

    # files ------------------------------------------------------------------------------------------------------
    def module_scope(self, module: Module) -> Env:
        env = Env(source=Source(module.shown, module.imports, self.follow, self.instances))
        for stmt in module.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
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
        return function, self.scope_of(module)

    def scope_of(self, module: Module) -> Env:
        """A project file's module scope, its top level walked first where the walk has not yet reached it."""
        scope = self.scopes.get(module.path)
        if scope is None:
            scope = self.module_scope(module) if self.done else self.run_module(module, Ctx())
        return scope

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

    # statements and expressions: each asks the budget first ---------------------------------------------------
    def statement(self, stmt: ast.stmt, ctx: Ctx, env: Env) -> Env:
        self.project.deadline.check()
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self.bare.add(id(stmt.value))
            if names.is_exit(name_in(stmt.value.func, env)):
                self.bare.update(id(arg) for arg in stmt.value.args)
        return super().statement(stmt, ctx, env)

    def hands_back(self, ctx: Ctx) -> bool:
        """A return from a function the module calls for its value (`optimizer = build(net)`) hands it back; one
        from a function called on its own (`main()`) ends the script."""
        return len(ctx.stack) == 1 and bool(self.giving) and self.giving[-1]

    def expr(self, node: ast.AST | None, ctx: Ctx, env: Env) -> None:
        self.project.deadline.check()
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
            self.enter(local, node.args, node.keywords, ctx, env, gives=id(node) not in self.bare)
            self.returns_instance(node, local[0])
            return
        if self.class_call(node, ctx, env):
            return
        name = name_in(node.func, env)
        held = [name_in(value, scope) for value, scope in candidates(node.func, env)
                if value is not node.func and isinstance(value, (ast.Name, ast.Attribute))]
        if not held and not ctx.dead:
            self.note_unresolved(name, node, env)
        if isinstance(node.func, ast.Name) and held:  # a name holding a callable: end(run) with end=pt.end_generation
            name = held[0]
            for other in held[1:]:
                self.emit("call", other, node, ctx, env)
        self.emit("call", name, node, ctx, env)
        if writes_marker(node, name, env):
            self.emit("marker", name, node, ctx, env)
        serial = names.is_training(name, "in_turn")
        for arg in node.args + [k.value for k in node.keywords]:
            handed = function_of(arg, env)
            if handed is not None:  # a callable handed to code we cannot see into: assume it is called there
                self.enter(handed, [], [], replace(ctx, serialized=ctx.serialized or serial), env)

    def enter(self, local, args, keywords, ctx: Ctx, env: Env, gives: bool = False) -> None:
        function, closure = local
        if function in ctx.stack or len(ctx.stack) >= MAX_DEPTH:
            return
        self.visited.add(function)
        scope = bind_call(function, list(args), list(keywords), env, closure)
        inner = replace(ctx, stack=ctx.stack + (function,))
        self.giving.append(gives)
        try:
            if isinstance(function, ast.Lambda):
                self.expr(function.body, inner, scope)
            else:
                self.block(function.body, inner, scope)
        finally:
            self.giving.pop()

    def exits_replaced(self) -> bool:
        for module in self.project.modules:
            if id(module) not in self.replaced:
                self.replaced[id(module)] = replaces_exit(module.tree)
        return any(self.replaced.values())

    def emit(self, kind: str, name: str | None, node: ast.AST, ctx: Ctx, env: Env) -> None:
        if ctx.dead:
            return
        self.flow.events.append(Event(len(self.flow.events), kind, name, node, ctx.guards, ctx.loops,
                                      ctx.serialized, len(ctx.stack), env.snapshot(), ctx.detached))


def replaces_exit(tree: ast.Module) -> bool:
    """Whether the file assigns, or setattr()s, anything named exit or quit (doctor.checks_exits reads how)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store) \
                and (node.id if isinstance(node, ast.Name) else node.attr) in EXIT_NAMES:
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in EXIT_NAMES:
            return True
    return False


def walk(project: Project) -> Flow:
    """The events of one process running the script (and the project files it imports), top level first, then
    functions nothing reached. Raises budget.OutOfTime when the project's deadline passes."""
    flow = Flow([], {}, deadline=project.deadline)
    walker = _Walker(flow, project)
    walker.run_module(project.entry, Ctx())
    walker.done = True
    for module in list(flow.modules):
        scope = walker.scopes[module.path]
        for stmt in module.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt not in walker.visited:
                walker.enter((stmt, scope), [], [], Ctx(detached=True), scope)
    walker.walk_methods(list(flow.modules))
    for module in flow.modules:
        flow.imports.update(module.imports)
        flow.options.update(argparse_defaults(module.tree))
        flow.strings |= {n.value for n in ast.walk(module.tree) if isinstance(n, ast.Constant)
                         and isinstance(n.value, str)}
    return flow
