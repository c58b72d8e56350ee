"""The project's classes as the walk meets them: `Trainer(args)` makes an instance and walks its `__init__` there,
`trainer.fit()` / `self.step()` / `super().fit()` walk the method there, like a call of one of the script's
functions, so that PerforatedAI calls kept in a trainer class are seen where they run.

An instance is its own scope (an Env whose `owner` is the Instance), between a method's locals and the file its
class is in. `self.X = value` in any of its methods binds ":X" there, so `self.X` (or `trainer.X`) read later
follows the value, like a name: the tracker, the DDP wrapper, the model, a flag, a string. Inside its methods a read
sees the attribute as it was at that point (events keep a snapshot); outside them, read after the walk, the last
value. An assignment under other ifs than the one before it keeps both values (either may be held), at most
MAX_ALTS. Not followed: attributes a class body sets, properties, setattr, and instances made in code the walk does
not see (a framework's factory: their methods are walked detached, below). A call on the class itself
(`Trainer.from_args(args)`) walks that classmethod or staticmethod, `cls(...)` in it making an instance.

A method is looked up in the instance's class, then in its project bases in order (depth first). Methods nothing
calls (PyTorch Lightning's training_step and on_validation_epoch_end, a callback's on_* hooks) run at a time the
script does not say: they are walked after everything else, detached like functions nothing calls (may run, order
unknown), `__init__` first, with `self` bound to the last instance made of the class or of a subclass, else to one
made for them (so `self.in_turn(...)` and `self.tracker` still read right in a class a framework builds).
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass

from pai_launch.doctor import names
from pai_launch.doctor.env import Binding, Env, candidates, name_in, returned
from pai_launch.doctor.project import Module
from pai_launch.doctor.statements import Ctx

KEY = ":"  # an attribute is bound in its instance's scope as ":NAME"
MAX_ALTS = 4  # values one attribute keeps
MAX_BASES = 8  # classes in a lookup order
MAX_FOLLOW = 6  # re-exports followed to a class in another file
MAX_ENTRIES = 32  # walks of one method: methods calling each other stay bounded (and within the walk's depth)


@dataclass(eq=False)  # one per instance made: compared and hashed by identity
class Instance:
    """What a constructor call made: of which class, defined in which scope."""

    cls: ast.ClassDef
    scope: Env


class Instances:
    """The instances one walk made, by the constructor call that made each (`Trainer(args)`)."""

    def __init__(self):
        self.made: dict[ast.AST, Env] = {}
        self.defined_in: dict[ast.AST, ast.ClassDef] = {}  # a method looked up -> its class
        self.entered: Counter[ast.AST] = Counter()  # a method -> how often a call walked it
        self.orders: dict[ast.ClassDef, list] = {}  # a class -> where its methods are looked up (lookup_order)

    def of(self, expr: ast.AST, env: Env | None, depth: int = 0) -> Env | None:
        """The live scope of the instance `expr` holds, or None when it holds none the walk made."""
        for value, _scope in candidates(expr, env, depth + 1):
            found = self.made.get(value)
            if found is not None:
                return found
        return None

    def attribute(self, expr: ast.Attribute, env: Env | None, depth: int = 0) -> Binding | None:
        """What `X.attr` holds where X is an instance: as at `env` when env is inside its methods, else the last."""
        live = self.of(expr.value, env, depth + 1)
        if live is None:
            return None
        scope = env
        while scope is not None and scope.owner is not live.owner:
            scope = scope.parent
        return (scope or live).names.get(KEY + expr.attr)


def held_after(old: Binding | None, new: Binding) -> Binding:
    """An attribute's value after an assignment: the new one, or either when it was assigned under other ifs."""
    if old is None or old.when == new.when or new.expr is None:
        return new
    earlier = old.alts if old.expr is None and old.alts else (old,)
    return Binding(None, alts=(*earlier, new)[-MAX_ALTS:])


def view(live: Env, scope: Env) -> Env:
    """The instance's scope as seen from a method defined in `scope` (a base class in another file): the same
    attributes, that file's names."""
    return live if live.parent is scope else Env(scope, live.names, owner=live.owner)


def is_static(function: ast.AST) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in getattr(function, "decorator_list", ()))


def is_classmethod(function: ast.AST) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "classmethod" for d in getattr(function, "decorator_list", ()))


class ClassWalk:
    """The walker's classes, kept apart from its files and calls; they use its project, scopes, emit and enter."""

    instances: Instances

    def class_of(self, expr: ast.AST, env: Env | None) -> tuple[ast.ClassDef, Env] | None:
        """The project's class `expr` names (the script's, or one in a file it imports), with its defining scope."""
        for value, scope in candidates(expr, env):
            if isinstance(value, ast.ClassDef) and scope is not None:
                return value, scope
            source = scope.file() if scope is not None else None
            if isinstance(value, (ast.Name, ast.Attribute)) and source is not None:
                found = self.follow_class(names.dotted(value, source.imports))
                if found is not None:
                    return found
        return None

    def follow_class(self, dotted: str | None, depth: int = 0) -> tuple[ast.ClassDef, Env] | None:
        module, rest = self.project.split(dotted)
        if module is None or len(rest) != 1 or depth > MAX_FOLLOW:
            return None
        for stmt in module.tree.body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == rest[0]:
                return stmt, self.scope_of(module)
        again = module.imports.get(rest[0])
        return self.follow_class(again, depth + 1) if again and again != dotted else None

    def lookup_order(self, cls: ast.ClassDef, scope: Env) -> list[tuple[ast.ClassDef, Env]]:
        """The class, then its project bases in order, depth first; each once, at most MAX_BASES (kept per class)."""
        if cls in self.instances.orders:
            return self.instances.orders[cls]
        order: list[tuple[ast.ClassDef, Env]] = self.instances.orders.setdefault(cls, [])
        pending = [(cls, scope)]
        while pending and len(order) < MAX_BASES:
            current, where = pending.pop(0)
            if any(current is seen for seen, _ in order):
                continue
            order.append((current, where))
            bases = [self.class_of(base, where) for base in current.bases]
            pending = [b for b in bases if b is not None] + pending
        return order

    def method(self, owner: Instance, name: str, after: ast.ClassDef | None = None) -> tuple[ast.AST, Env] | None:
        """The def `name` that an instance's attribute reaches (for super(): past class `after`), with its scope."""
        order = self.lookup_order(owner.cls, owner.scope)
        if after is not None:
            past = [n for n, (cls, _) in enumerate(order) if cls is after]
            order = order[past[0] + 1:] if past else []
        for cls, where in order:
            for stmt in cls.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                    self.instances.defined_in[stmt] = cls
                    return stmt, where
        return None

    def class_call(self, node: ast.Call, ctx: Ctx, env: Env) -> bool:
        """Walk what `node` runs when it makes an instance of a project class or calls a method of one; False when
        it does neither (an unknown receiver stays unwalked)."""
        made = self.class_of(node.func, env)
        if made is not None:
            cls, scope = made
            live = Env(scope, owner=Instance(cls, scope))
            self.instances.made[node] = live
            self.emit("call", name_in(node.func, env), node, ctx, env)
            self.call_method(node, live, "__init__", [node], ctx, env)
            return True
        if not isinstance(node.func, ast.Attribute):
            return False
        receiver, after = node.func.value, None
        if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super":
            current = next((f for f in reversed(ctx.stack) if f in self.instances.defined_in), None)
            params = current.args.posonlyargs + current.args.args if current is not None else []
            if not params:
                return False
            receiver, after = ast.Name(id=params[0].arg, ctx=ast.Load()), self.instances.defined_in[current]
        live = self.instances.of(receiver, env)
        if live is not None:
            return self.call_method(node, live, node.func.attr, [receiver], ctx, env, after)
        on_class = self.class_of(receiver, env)  # Trainer.from_args(...): a classmethod or staticmethod
        found = self.method(Instance(*on_class), node.func.attr) if on_class is not None else None
        if found is None:
            return False
        function, scope = found
        self.emit("call", f"{self.instances.defined_in[function].name}.{function.name}", node, ctx, env)
        args = [receiver] + node.args if is_classmethod(function) else node.args
        self.enter((function, scope), args, node.keywords, ctx, env, gives=id(node) not in self.bare)
        self.returns_instance(node, function)
        return True

    def call_method(self, node: ast.Call, live: Env, name: str, receiver: list[ast.expr], ctx: Ctx, env: Env,
                    after: ast.ClassDef | None = None) -> bool:
        found = self.method(live.owner, name, after)
        if found is None:
            return False
        function, scope = found
        if name != "__init__":
            self.emit("call", f"{self.instances.defined_in[function].name}.{name}", node, ctx, env)
        if self.instances.entered[function] >= MAX_ENTRIES:
            return True
        self.instances.entered[function] += 1
        args = node.args if is_static(function) else receiver + node.args
        self.enter((function, view(live, scope)), args, node.keywords, ctx, env, gives=id(node) not in self.bare)
        self.returns_instance(node, function)
        return True

    def returns_instance(self, node: ast.Call, function: ast.AST) -> None:
        """A call of a function that returns an instance it made (`return Trainer(args)`, `return cls(args)`, or
        a name it assigned one to) holds that instance: `trainer = build(args); trainer.fit()`."""
        assigned = {target.id: stmt.value for stmt in ast.walk(function) if isinstance(stmt, ast.Assign)
                    for target in stmt.targets if isinstance(target, ast.Name)}
        for value in returned(function):
            value = assigned.get(value.id, value) if isinstance(value, ast.Name) else value
            if value in self.instances.made:
                self.instances.made[node] = self.instances.made[value]
                return

    def hold(self, target: ast.Attribute, binding: Binding, env: Env) -> None:
        """`X.attr = value` where X is an instance: bound in its scope."""
        live = self.instances.of(target.value, env)
        if live is not None:
            key = KEY + target.attr
            live.names[key] = held_after(live.names.get(key), binding)

    def walk_methods(self, modules: list[Module]) -> None:
        """The methods nothing called (a framework's hooks), each on its own, detached, after everything else:
        `__init__` first, on the last instance made of the class or of a subclass, else on one made here."""
        for module in modules:
            scope = self.scopes[module.path]
            for cls in (s for s in module.tree.body if isinstance(s, ast.ClassDef)):
                pending = [f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                           and f not in self.visited]
                if not pending:
                    continue
                made = [(node, live) for node, live in self.instances.made.items()
                        if any(c is cls for c, _ in self.lookup_order(live.owner.cls, live.owner.scope))]
                node, live = made[-1] if made else self.unmade(cls, scope)
                for function in sorted(pending, key=lambda f: f.name != "__init__"):
                    if function not in self.visited:  # not walked meanwhile by a method that calls it
                        self.instances.defined_in[function] = cls
                        self.enter((function, view(live, scope)), [] if is_static(function) else [node], [],
                                   Ctx(detached=True), scope)

    def unmade(self, cls: ast.ClassDef, scope: Env) -> tuple[ast.AST, Env]:
        """An instance of a class that the walk never saw made (a framework makes it): `self` in its methods."""
        node = ast.Call(func=ast.Name(id=cls.name, ctx=ast.Load()), args=[], keywords=[])
        live = Env(scope, owner=Instance(cls, scope))
        self.instances.made[node] = live
        return node, live
