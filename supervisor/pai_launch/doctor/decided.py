"""An `if` whose test a constant decides: `args.distributed = False` (or `distributed = False`) and later
`if args.distributed:`, `if not distributed:`, `if args.distributed and args.sync_bn:`. A script that keeps
torchvision's DDP code but hard-codes the flag off never runs that code, so the walk takes only the branch that runs.

Read from the ast alone, and only where it is sure. The constant must be assigned by a statement that runs before the
if on every path to it (an earlier statement of the same block or of a block around it, in the same function or at
module level), and between that statement and the test (the whole loop, where a loop around the if does not hold
the assignment) nothing may change it: no other assignment, augmented assignment, `del` or `global`/`nonlocal` of
the name; for an attribute of a name (`args.distributed`), the name is rebound nowhere there and used only to read
or set its other attributes, or handed to `getattr`/`hasattr`/`isinstance`/`print`, or to a function of the project
that does the same with it (followed three calls deep). Anything else keeps the test unknown: `setattr`, `vars(...)`,
a method of the object, the object stored, returned or handed to code doctor cannot read (a library, a class's
method, `*args`), a nested def that touches it, an object that is not the function's own (a parameter or a name it
assigns; at module level, one no def of the file touches). Code of other files that sets a module's global is not
looked for.
"""

from __future__ import annotations

import ast
from functools import lru_cache

from pai_launch.doctor.env import Env, function_of

#: builtins that read an object and keep no reference to it
READERS = frozenset({"getattr", "hasattr", "isinstance", "print", "repr", "str", "type", "id"})
MAX_CALLS = 3
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def truth(test: ast.AST, where: ast.If, scope: ast.AST, env: Env | None) -> bool | None:
    """True or False where the test's value is decided when the walk reaches `where`, else None."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        held = truth(test.operand, where, scope, env)
        return None if held is None else not held
    if isinstance(test, ast.BoolOp):
        values = [truth(value, where, scope, env) for value in test.values]
        deciding = isinstance(test.op, ast.Or)  # one True decides an `or`, one False an `and`
        if deciding in values:
            return deciding
        return (not deciding) if all(v is not None for v in values) else None
    if isinstance(test, ast.Constant):
        return bool(test.value)
    target = _target(test)
    if target is None:
        return None
    value = _constant(target, where, scope, env)
    return None if value is None else bool(value.value)


def _target(expr: ast.AST) -> tuple[str, str | None] | None:
    """(name, None) for `NAME`, (name, attribute) for `NAME.attribute`."""
    if isinstance(expr, ast.Name):
        return expr.id, None
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        return expr.value.id, expr.attr
    return None


@lru_cache(maxsize=32)
def _parents(scope: ast.AST) -> dict[int, tuple[ast.AST, str, int | None]]:
    """Each node of the scope (nested defs included) -> (its parent, the field it is in, its index in that list)."""
    found = {}
    for parent in ast.walk(scope):
        for name, value in ast.iter_fields(parent):
            if isinstance(value, list):
                found.update((id(child), (parent, name, index)) for index, child in enumerate(value)
                             if isinstance(child, ast.AST))
            elif isinstance(value, ast.AST):
                found[id(value)] = (parent, name, None)
    return found


def _assigns(stmt: ast.stmt, target: tuple[str, str | None]) -> ast.Constant | None:
    """The constant a plain `TARGET = CONSTANT` (or `TARGET: T = CONSTANT`) statement gives the target."""
    if isinstance(stmt, ast.Assign):
        targets, value = stmt.targets, stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        targets, value = [stmt.target], stmt.value
    else:
        return None
    if isinstance(value, ast.Constant) and any(_target(t) == target for t in targets):
        return value
    return None


def _constant(target, where: ast.If, scope: ast.AST, env: Env | None) -> ast.Constant | None:
    """The constant the last assignment before `where` gave the target, where nothing can have changed it since."""
    parents = _parents(scope)
    between: list[ast.AST] = [where.test]
    node: ast.AST = where
    while node is not scope:
        if id(node) not in parents:
            return None
        parent, field, index = parents[id(node)]
        if isinstance(parent, SCOPES) and parent is not scope:
            return None
        if index is not None and isinstance(parent, (ast.stmt, ast.Module, ast.ExceptHandler, ast.match_case)):
            for earlier in reversed(getattr(parent, field)[:index]):
                value = _assigns(earlier, target)
                if value is not None:
                    return None if _changed(target, between, scope, env) else value
                between.append(earlier)
        if parent is not scope:
            between.extend(_before(parent, field))
        node = parent
    return None


def _before(parent: ast.AST, field: str) -> list[ast.AST]:
    """What of the statement around the if's block may run before the if: a loop's every part (its later turns),
    a try's other blocks (a handler runs after part of the body), else the headers (an if's test, a with's items)."""
    if isinstance(parent, (ast.For, ast.AsyncFor, ast.While)):
        return [parent]
    every = [(name, value) for name, value in ast.iter_fields(parent) if name != field]
    if isinstance(parent, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        return [n for _name, value in every for n in (value if isinstance(value, list) else [value])]
    return [n for _name, value in every for n in (value if isinstance(value, list) else [value])
            if isinstance(n, ast.AST) and not isinstance(n, (ast.stmt, ast.ExceptHandler, ast.match_case))]


def _changed(target, between: list[ast.AST], scope: ast.AST, env: Env | None) -> bool:
    name, attribute = target
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names for n in ast.walk(scope)):
        return True
    if attribute is None:
        return any(_rebinds(node, name) for node in between)
    if isinstance(scope, ast.Module):
        foreign = [f for f in ast.walk(scope) if isinstance(f, SCOPES[:3]) and name not in _parameters(f)]
    else:
        if name not in _parameters(scope) and not any(_rebinds(s, name) for s in scope.body):
            return True  # not the function's own object: other code may hold it
        foreign = [f for f in ast.walk(scope) if isinstance(f, SCOPES[:3]) and f is not scope
                   and name not in _parameters(f)]
    return any(_touches(f, name, attribute, None, ()) for f in foreign) \
        or any(_touches(node, name, attribute, env, ()) for node in between)


def _parameters(function: ast.AST) -> set[str]:
    arguments = getattr(function, "args", None)
    if not isinstance(arguments, ast.arguments):
        return set()
    every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs + [arguments.vararg, arguments.kwarg]
    return {a.arg for a in every if a is not None}


def _rebinds(node: ast.AST, name: str) -> bool:
    """Whether the code binds or deletes the name (any way Python can)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name \
                or isinstance(n, ast.ExceptHandler) and n.name == name \
                or isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name == name \
                or isinstance(n, ast.MatchMapping) and n.rest == name \
                or isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return True
        if isinstance(n, ast.alias) and (n.asname or n.name.split(".")[0]) == name:
            return True
    return False


def _touches(node: ast.AST, name: str, attribute: str, env: Env | None, seen: tuple) -> bool:
    """Whether the code may change `name.attribute`: sets or deletes it, calls a method of `name`, or lets `name`
    go anywhere but an attribute read, a reading builtin, or a project function that leaves it alone."""
    safe: set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name:
            if n.attr == attribute and not isinstance(n.ctx, ast.Load) or n.attr == "__dict__":
                return True
            safe.add(id(n.value))
        elif isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id == name:
                return True  # a method of the object itself
            given = [(i, None, a) for i, a in enumerate(n.args)] + [(None, k.arg, k.value) for k in n.keywords]
            for position, keyword, value in given:
                if isinstance(value, ast.Name) and value.id == name \
                        and _leaves_alone(n, position, keyword, attribute, env, seen):
                    safe.add(id(value))
        elif isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return True
    return any(isinstance(n, ast.Name) and n.id == name and id(n) not in safe for n in ast.walk(node))


def _leaves_alone(call: ast.Call, position: int | None, keyword: str | None, attribute: str, env: Env | None,
                  seen: tuple) -> bool:
    """Whether the callee does not change that attribute of the argument at `position` (or `keyword`)."""
    if isinstance(call.func, ast.Name) and call.func.id in READERS \
            and (env is None or env.lookup(call.func.id) is None):
        return True
    if env is None or len(seen) >= MAX_CALLS or any(isinstance(a, ast.Starred) for a in call.args) \
            or any(k.arg is None for k in call.keywords):
        return False
    found = function_of(call.func, env)
    if found is None or not isinstance(found[0], (ast.FunctionDef, ast.AsyncFunctionDef)) or found[0] in seen:
        return False
    function, closure = found
    arguments = function.args
    positional = [a.arg for a in arguments.posonlyargs + arguments.args]
    if keyword is not None:
        parameter = keyword if keyword in positional[len(arguments.posonlyargs):] + \
            [a.arg for a in arguments.kwonlyargs] else None
    else:
        parameter = positional[position] if position < len(positional) else None
    if parameter is None:
        return False
    return not any(_touches(stmt, parameter, attribute, closure, seen + (function,)) for stmt in function.body)
