"""Where a finding's edit goes in a libcst tree: the nodes on a line, the block a statement stands in, the ifs around
it and what they say about the process (doctor's own reading), and the names the edit may use there (import aliases,
the parsed arguments, pai_launch.training's Run). Pure functions of the tree; each edit returns a new module."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Sequence

import libcst as cst

from pai_launch.doctor import guards, names
from pai_launch.doctor.guards import Meaning
from pai_launch.fix.cst import Tree
from pai_launch.fix.edit import Unfixable

BLOCKS = (cst.Module, cst.IndentedBlock)
SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
PERFORATE = ("perforate_model", "initialize_pai")  # initialize_pai: 1.x's name, which races the same way


def read(module: cst.Module) -> Tree:
    return Tree(module)  # positions and parents are read once per module (fix.cst.metadata), its nodes not copied


def line(tree: Tree, node: cst.CSTNode) -> int:
    return tree.position[node].start.line


def dotted(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted(expr.value)
        return None if base is None else f"{base}.{expr.attr.value}"
    return None


def full_name(tree: Tree, expr: cst.BaseExpression) -> str | None:
    """The callee's dotted name with the file's import aliases expanded, as doctor names it."""
    name = dotted(expr)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    head = tree.imports.get(head, head)
    return f"{head}.{rest}" if rest else head


def tail(call: cst.Call) -> str:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""


def calls(tree: Tree, keep: Callable[[cst.Call], bool], at: int | None = None) -> list[cst.Call]:
    """The calls `keep` accepts (on line `at` where given), in source order."""
    found = [n for n in tree.position if isinstance(n, cst.Call) and keep(n) and (at is None or line(tree, n) == at)]
    return sorted(found, key=lambda n: (tree.position[n].start.line, tree.position[n].start.column))


def only(found: Sequence, what: str):
    if len(found) != 1:
        raise Unfixable(f"{'no' if not found else len(found)} {what}")
    return found[0]


def ancestors(tree: Tree, node: cst.CSTNode):
    while node in tree.parent:
        node = tree.parent[node]
        yield node


def statement(tree: Tree, node: cst.CSTNode) -> cst.BaseStatement:
    """The statement in a block that holds the node (its own line, not a one-line `if x: y`)."""
    for up in [node, *ancestors(tree, node)]:
        if isinstance(up, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and isinstance(
                tree.parent.get(up), BLOCKS):
            return up
        if isinstance(up, cst.SimpleStatementSuite):
            break
    raise Unfixable("the call shares its line with an if or loop header (a one-line block)")


def bare_call(tree: Tree, call: cst.Call) -> cst.SimpleStatementLine:
    """The statement that is just this call (`dist.barrier()`), else Unfixable."""
    stmt = statement(tree, call)
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and stmt.body[0].value is call):
        raise Unfixable(f"{tail(call)}() is part of a larger statement")
    return stmt


def guards_of(tree: Tree, node: cst.CSTNode) -> list[tuple[cst.If, bool]]:
    """The ifs around the node, innermost first, with the branch it is in (True: the body)."""
    found, child = [], node
    for up in ancestors(tree, node):
        if isinstance(up, cst.If) and child is not up.test:
            found.append((up, child is up.body))
        child = up
    return found


def meaning(tree: Tree, test: cst.BaseExpression, positive: bool = True) -> Meaning:
    """What doctor reads in the condition (init run, DDP rank, rank 0)."""
    source = "(" + tree.module.code_for_node(test) + ")"
    return guards.meaning(ast.parse(source, mode="eval").body, positive, None)


def mode(tree: Tree, node: cst.CSTNode) -> Meaning:
    total = guards.NOTHING
    for branch, positive in reversed(guards_of(tree, node)):
        total = total.plus(meaning(tree, branch.test, positive))
    return total


def scope(tree: Tree, node: cst.CSTNode) -> cst.CSTNode | None:
    """The def (or lambda, class) the node runs in; None for the module."""
    return next((up for up in ancestors(tree, node) if isinstance(up, SCOPES)), None)


def insert(module: cst.Module, tree: Tree, anchor: cst.BaseStatement, new: Sequence[cst.BaseStatement],
           after: bool) -> cst.Module:
    """The module with `new` before or after `anchor` in its block (`anchor` keeps its comments above it)."""
    block = tree.parent[anchor]
    body = list(block.body)
    at = next(i for i, s in enumerate(body) if s is anchor)
    if after:
        body[at + 1:at + 1] = new
    else:
        new = list(new)
        new[0] = new[0].with_changes(leading_lines=anchor.leading_lines)
        body[at:at + 1] = [*new, anchor.with_changes(leading_lines=())]
    return module.deep_replace(block, block.with_changes(body=body))


def sibling(tree: Tree, stmt: cst.BaseStatement, step: int) -> cst.BaseStatement | None:
    body = list(tree.parent[stmt].body)
    at = next(i for i, s in enumerate(body) if s is stmt) + step
    return body[at] if 0 <= at < len(body) else None


def stmts(code: str) -> list[cst.BaseStatement]:
    return list(cst.parse_module(code).body)


def code(tree: Tree, node: cst.CSTNode) -> str:
    return tree.module.code_for_node(node)


def uses_name(tree: Tree, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in tree.position)


def alias(tree: Tree, module_path: str) -> str | None:
    """The module-level name the file imports `module_path` as (`torch.distributed` also through `import torch`)."""
    for local, path in tree.top_imports.items():
        if path == module_path:
            return local
    parent, _, child = module_path.rpartition(".")
    if parent == "torch":
        return next((f"{local}.{child}" for local, path in tree.top_imports.items() if path == "torch"), None)
    return None


def plan_import(tree: Tree, module_path: str, name: str) -> str:
    """The name an edit may use for `module_path`: the file's own module-level alias, or `name` where it is free
    (add_imports then adds the import)."""
    found = alias(tree, module_path)
    if found is not None:
        return found
    if uses_name(tree, name):
        raise Unfixable(f"the script does not import {module_path} and uses the name {name} for something else")
    return name


def add_imports(module: cst.Module, wanted: Sequence[tuple[str, str]]) -> cst.Module:
    """The module with `import module_path as name` (or its plainer spelling) after its last top-level import, for
    each (module_path, name) plan_import chose that the file does not import yet."""
    for module_path, name in wanted:
        if alias(read(module), module_path) is not None:
            continue
        parent, _, child = module_path.rpartition(".")
        text = (f"import {module_path}" if child == name and not parent else
                f"from {parent} import {child}" if child == name else f"import {module_path} as {name}")
        module = after_imports(module, stmts(text + "\n"), module_path.split(".")[0] in sys.stdlib_module_names)
    return module


def _imports(statement: cst.BaseStatement, stdlib: bool) -> bool:
    if not (isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], (cst.Import,
                                                                                              cst.ImportFrom))):
        return False
    if not stdlib:
        return True
    small = statement.body[0]
    name = small.names[0].name if isinstance(small, cst.Import) else small.module
    return name is not None and (dotted(name) or "").split(".")[0] in sys.stdlib_module_names


def _last_import(module: cst.Module, stdlib: bool = False) -> int:
    return max((i for i, s in enumerate(module.body) if _imports(s, stdlib)), default=-1)


def before_imports(tree: Tree, node: cst.CSTNode) -> bool:
    """Whether the node's top-level statement comes before the file's last top-level import."""
    top = next(up for up in [node, *ancestors(tree, node)] if tree.parent.get(up) is tree.module)
    return list(tree.module.body).index(top) < _last_import(tree.module)


def after_imports(module: cst.Module, new: Sequence[cst.BaseStatement], stdlib: bool = False) -> cst.Module:
    """The module with `new` after its last top-level import (its last standard-library one, for `stdlib`)."""
    body = list(module.body)
    last = _last_import(module, stdlib)
    if last < 0 and stdlib:
        return after_imports(module, new)
    if last < 0:
        raise Unfixable("the script has no top-level imports to add beside")
    return module.with_changes(body=[*body[:last + 1], *new, *body[last + 1:]])


def bound_before(tree: Tree, node: cst.CSTNode, is_value: Callable[[cst.BaseExpression], bool]) -> str | None:
    """A name assigned a value `is_value` accepts that the node can read: in its own def before it, or at module
    level where its def does not bind that name itself."""
    home = scope(tree, node)
    here = line(tree, node)
    candidates: list[tuple[cst.CSTNode | None, str, int]] = []
    for assign in (n for n in tree.position if isinstance(n, cst.Assign)):
        target = assign.targets[0].target if len(assign.targets) == 1 else None
        if isinstance(target, cst.Tuple) and target.elements:
            target = target.elements[0].value
        if isinstance(target, cst.Name) and is_value(assign.value):
            candidates.append((scope(tree, assign), target.value, line(tree, assign)))
    local = [name for where, name, at in candidates if where is home and at < here]
    if local:
        return local[-1]
    if home is None:
        return None
    own = {n.value for n in tree.position if isinstance(n, cst.Name) and scope(tree, n) is home
           and isinstance(tree.parent.get(n), (cst.Param, cst.AssignTarget))}
    top = [name for where, name, _at in candidates if where is None and name not in own]
    return top[-1] if top else None


def _parses_args(tree: Tree) -> Callable[[cst.BaseExpression], bool]:
    top = {d for d in tree.module.body if isinstance(d, cst.FunctionDef)}
    helpers = {home.name.value for n in tree.position if isinstance(n, cst.Call) and tail(n) in ("parse_args",
               "parse_known_args") and (home := scope(tree, n)) in top}
    return lambda value: isinstance(value, cst.Call) and (
        tail(value) in ("parse_args", "parse_known_args")
        or isinstance(value.func, cst.Name) and value.func.value in helpers)


def parsed_args(tree: Tree, node: cst.CSTNode, flag: str) -> str | None:
    """The argparse namespace the node can read `flag` from, where the script declares the flag."""
    declared = any(isinstance(n, cst.SimpleString) and n.evaluated_value == "--" + flag for n in tree.position)
    return bound_before(tree, node, _parses_args(tree)) if declared else None


def training_run(tree: Tree, node: cst.CSTNode) -> tuple[str, str] | None:
    """(pai_launch.training's alias, the Run from its start()) where the node can use both, else None."""
    pt = alias(tree, "pai_launch.training")
    if pt is None:
        return None
    run = bound_before(tree, node, lambda v: isinstance(v, cst.Call) and full_name(tree, v.func) == names.TRAINING
                       + "start")
    return (pt, run) if run is not None else None
