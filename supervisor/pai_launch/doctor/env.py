"""What a name in the script holds at a point of the walk: the expression last assigned to it, followed back.

The walk binds names as it meets assignments, function parameters (to the call's arguments) and defs, so a check
can ask of `model` "is this the DDP wrapper?" or of `save` "which string is this?" without running anything.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable, Iterator

from pai_launch.doctor import names

MAX_FOLLOW = 8


@dataclass(frozen=True)
class Binding:
    """A name's value: `expr` evaluated in `env` (element `index` of it when tuple-unpacked); `alts`: one of these."""

    expr: ast.AST | None
    env: "Env | None" = None
    index: int | None = None
    alts: tuple["Binding", ...] = ()
    when: tuple = ()  # the Guards (doctor.guards) of the ifs around the assignment


@dataclass(frozen=True)
class Source:
    """The file a module scope belongs to: its path as shown in findings and its imports (local name -> dotted)."""

    path: str
    imports: dict[str, str]
    #: dotted name -> (the project's def it names, the module scope it closes over), for calls into other files
    follow: Callable[[str | None], "tuple[ast.AST, Env] | None"] | None = None
    #: the instances the walk made (doctor.classes.Instances): what `obj.attr` holds where obj is one of them
    instances: object = None


@dataclass
class Env:
    """One scope of the walk: its bindings, then the enclosing (module) scope's."""

    parent: "Env | None" = None
    names: dict[str, Binding] = field(default_factory=dict)
    source: Source | None = None  # set on a module's scope
    owner: object = None  # set on an instance's scope: the doctor.classes.Instance whose attributes it binds

    def file(self) -> Source | None:
        """The file whose code this scope runs (its module scope's Source)."""
        scope: Env | None = self
        while scope is not None:
            if scope.source is not None:
                return scope.source
            scope = scope.parent
        return None

    def lookup(self, name: str) -> Binding | None:
        scope: Env | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None

    def copy(self) -> "Env":
        return Env(self.parent, dict(self.names), self.source, self.owner)

    def snapshot(self) -> "Env":
        """This scope and every enclosing one as they are now (later assignments do not show in it)."""
        return Env(self.parent.snapshot() if self.parent is not None else None, dict(self.names), self.source,
                   self.owner)

    def merge(self, other: "Env") -> "Env":
        """After an if/else: a name bound differently on the two paths holds either value."""
        merged = dict(self.names)
        for name, binding in other.names.items():
            mine = merged.get(name)
            if mine is None:
                merged[name] = binding
            elif mine is not binding:
                merged[name] = Binding(None, alts=(mine, binding))
        return Env(self.parent, merged, self.source, self.owner)


def candidates(expr: ast.AST, env: Env | None, depth: int = 0) -> Iterator[tuple[ast.AST, Env | None]]:
    """The expressions `expr` may stand for: names followed back through their bindings."""
    for value, scope, _when in guarded_candidates(expr, env, depth):
        yield value, scope


def guarded_candidates(expr: ast.AST, env: Env | None, depth: int = 0,
                       when: tuple = ()) -> Iterator[tuple[ast.AST, Env | None, tuple]]:
    """candidates(), each with the Guards of the ifs around the assignments it was followed through."""
    if depth > MAX_FOLLOW:
        return
    if isinstance(expr, ast.Name) and env is not None:
        binding = env.lookup(expr.id)
        if binding is not None:
            yield from _binding_candidates(binding, depth + 1, when)
            return
    source = env.file() if isinstance(expr, ast.Attribute) and env is not None else None
    if source is not None and source.instances is not None:  # an attribute of an instance (doctor.classes)
        binding = source.instances.attribute(expr, env, depth)
        if binding is not None:
            yield from _binding_candidates(binding, depth + 2, when)
            return
    yield expr, env, when


def _binding_candidates(binding: Binding, depth: int, when: tuple) -> Iterator[tuple[ast.AST, Env | None, tuple]]:
    for alt in binding.alts:
        yield from _binding_candidates(alt, depth + 1, when)
    if binding.expr is None:
        return
    when = when + tuple(g for g in binding.when if g not in when)
    if binding.index is None:
        yield from guarded_candidates(binding.expr, binding.env, depth, when)
    elif isinstance(binding.expr, (ast.Tuple, ast.List)) and binding.index < len(binding.expr.elts):
        yield from guarded_candidates(binding.expr.elts[binding.index], binding.env, depth, when)


def function_of(expr: ast.AST, env: Env | None) -> tuple[ast.AST, Env | None] | None:
    """The def or lambda that `expr` names (the script's, or one in another file of the project it imports), with
    the scope it closes over; None for anything else."""
    for value, scope in candidates(expr, env):
        if isinstance(value, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return value, scope
        source = scope.file() if scope is not None else None
        if isinstance(value, (ast.Name, ast.Attribute)) and source is not None and source.follow is not None:
            found = source.follow(names.dotted(value, source.imports))
            if found is not None:
                return found
    return None


def bind_call(function: ast.AST, call_args: list[ast.expr], call_keywords: list[ast.keyword],
              caller: Env | None, closure: Env | None) -> Env:
    """A fresh scope for a call of `function`: each parameter bound to its argument, evaluated in the caller."""
    scope = Env(closure if closure is not None else caller)
    caller = caller.snapshot() if caller is not None else None  # the arguments as they are at the call
    arguments = function.args
    params = [a.arg for a in arguments.posonlyargs + arguments.args]
    for name, value in zip(params, call_args):
        scope.names[name] = Binding(value, caller)
    for keyword in call_keywords:
        if keyword.arg is not None:
            scope.names[keyword.arg] = Binding(keyword.value, caller)
    for name in params + [a.arg for a in arguments.kwonlyargs]:
        scope.names.setdefault(name, Binding(None))
    return scope


def returned(function: ast.AST) -> list[ast.expr]:
    """The expressions a def returns (not its nested defs'), or a lambda's body."""
    if isinstance(function, ast.Lambda):
        return [function.body]
    found: list[ast.expr] = []
    stack = list(function.body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            found.append(node.value)
        stack.extend(ast.iter_child_nodes(node))
    return found


def name_in(expr: ast.AST, env: Env | None) -> str | None:
    """The dotted name of `expr` with the imports of the file `env` belongs to."""
    source = env.file() if env is not None else None
    return names.dotted(expr, source.imports if source is not None else {})


def wrapper_kind(expr: ast.AST, env: Env | None, depth: int = 0) -> str | None:
    """"ddp" or "dp" when `expr` may hold the DistributedDataParallel / DataParallel wrapper, else None."""
    if depth > 3:
        return None
    for value, scope in candidates(expr, env):
        if not isinstance(value, ast.Call):
            continue
        callee = name_in(value.func, scope)
        if names.is_ddp(callee) or names.is_training(callee, "wrap_ddp"):
            return "ddp"
        if names.is_data_parallel(callee):
            return "dp"
        if callee and callee.endswith((".to", ".cuda")) and isinstance(value.func, ast.Attribute):
            kind = wrapper_kind(value.func.value, scope, depth + 1)
            if kind:
                return kind
        local = function_of(value.func, scope)
        if local is not None:
            inner = bind_call(local[0], value.args, value.keywords, scope, local[1])
            for result in returned(local[0]):
                kind = wrapper_kind(result, inner, depth + 1)
                if kind:
                    return kind
    return None


def string_value(expr: ast.AST, env: Env | None, options: dict[str, object]) -> tuple[str | None, str]:
    """(the string `expr` holds, "literal" | "argparse"), or (None, "") when it cannot be read statically.
    `options`: argparse dest -> default, for `args.<dest>`."""
    for value, _scope in candidates(expr, env):
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value, "literal"
        if isinstance(value, ast.Attribute) and value.attr in options:
            default = options[value.attr]
            if isinstance(default, str):
                return default, "argparse"
    return None, ""


def argparse_defaults(tree: ast.Module) -> dict[str, object]:
    """argparse dest -> default (None when not a literal), from every add_argument call in the file."""
    found: dict[str, object] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        dest = keywords.get("dest")
        if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
            key = dest.value
        else:
            long = [f for f in flags if f.startswith("--")] or flags
            if not long:
                continue
            key = long[0].lstrip("-").replace("-", "_")
        default = keywords.get("default")
        found[key] = default.value if isinstance(default, ast.Constant) else None
    return found
