"""Finding things in a file's libcst tree the way doctor names them, and the few block edits the fixers share.

Names are read as doctor reads them (doctor.names: imports expanded, so `UPA.perforate_model` and
`from perforatedai.utils_perforatedai import perforate_model` are one name). Edits replace nodes by identity, so the
tree is never copied before its positions are read.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterator

import libcst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from pai_launch.doctor import names
from pai_launch.fix.edit import Unfixable

GLOBALS_MODULE = "perforatedai.globals_perforatedai"

@functools.lru_cache(maxsize=8)
def metadata(module: libcst.Module) -> tuple[dict, dict]:
    """The positions and parents of the module's nodes, read in one pass and kept for the last few modules (a
    module hashes by identity): several fixers and doctor's re-checks read the same tree, and on a large script each
    reading takes about a second."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)  # nodes stay the module's: deep_replace finds them
    resolved = wrapper.resolve_many([PositionProvider, ParentNodeProvider])
    return resolved[PositionProvider], resolved[ParentNodeProvider]


class Tree:
    """A module with its nodes' positions and parents (read once; the module itself is not copied)."""

    def __init__(self, module: libcst.Module):
        self.module = module
        self.position, self.parent = metadata(module)
        parsed = ast.parse(module.code)
        #: Local name -> dotted name: every import in the file, and the module-level ones alone.
        self.imports = names.import_map(parsed)
        top = [n for n in parsed.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        self.top_imports = names.import_map(ast.Module(body=top, type_ignores=[]))

    def name(self, node: libcst.CSTNode) -> str | None:
        """The dotted name of a Name/Attribute chain with the file's imports expanded, as doctor reads it."""
        written = get_full_name_for_node(node)
        if not written:
            return None
        head, _, rest = written.partition(".")
        full = self.imports.get(head, head)
        return f"{full}.{rest}" if rest else full

    def calls(self, predicate: Callable[[str | None], bool]) -> Iterator[libcst.Call]:
        """The calls whose callee's name satisfies `predicate`, in source order."""
        found = [n for n in self.position if isinstance(n, libcst.Call) and predicate(self.name(n.func))]
        yield from sorted(found, key=self.start)

    def start(self, node: libcst.CSTNode) -> tuple[int, int]:
        where = self.position[node].start
        return where.line, where.column

    def call_at(self, line: int | None, predicate: Callable[[str | None], bool], what: str) -> libcst.Call:
        """The first call on `line` whose name satisfies `predicate`; Unfixable when there is none."""
        found = next((c for c in self.calls(predicate) if self.start(c)[0] == line), None)
        if found is None:
            raise Unfixable(f"no {what} call found on line {line}")
        return found

    def statement(self, node: libcst.CSTNode) -> libcst.BaseStatement:
        """The innermost statement holding `node`; Unfixable when it shares a line with others (`if x: a; b`)."""
        while not isinstance(node, libcst.BaseStatement):
            node = self.parent[node]
        if isinstance(self.parent.get(node), libcst.SimpleStatementSuite):
            raise Unfixable("the call is in a one-line block (`if x: a; b`): move it by hand")
        return node

    def block(self, statement: libcst.BaseStatement) -> libcst.CSTNode:
        """The Module or IndentedBlock whose body holds `statement`."""
        parent = self.parent[statement]
        return parent

    def line(self, node: libcst.CSTNode) -> int:
        return self.start(node)[0]


def globals_name(tree: Tree) -> str | None:
    """How the file spells perforatedai.globals_perforatedai at its top level, or None when it has no name for it."""
    for node in tree.module.body:
        for statement in node.body if isinstance(node, libcst.SimpleStatementLine) else ():
            if isinstance(statement, libcst.ImportFrom) and not statement.relative and \
                    isinstance(statement.names, tuple):
                module = get_full_name_for_node(statement.module) if statement.module else ""
                for alias in statement.names:
                    full = f"{module}.{get_full_name_for_node(alias.name)}"
                    if full in (GLOBALS_MODULE, "perforatedai.utils_perforatedai.GPA"):
                        return _bound(alias)
            elif isinstance(statement, libcst.Import):
                for alias in statement.names:
                    if get_full_name_for_node(alias.name) == GLOBALS_MODULE:
                        return _bound(alias) if alias.asname else GLOBALS_MODULE
    return None


def _bound(alias: libcst.ImportAlias) -> str:
    return get_full_name_for_node(alias.asname.name) if alias.asname else get_full_name_for_node(alias.name)


def statement_line(code: str) -> libcst.SimpleStatementLine:
    parsed = libcst.parse_statement(code)
    assert isinstance(parsed, libcst.SimpleStatementLine)
    return parsed


def body_of(block: libcst.CSTNode) -> list:
    if not isinstance(block, (libcst.Module, libcst.IndentedBlock)):
        raise Unfixable("the statement is not in a block that can take another statement")
    return list(block.body)


def split_leading(statement: libcst.BaseStatement) -> tuple[tuple, tuple]:
    """The statement's leading lines as (the blank lines before its first comment, the comment lines and after)."""
    lines = tuple(getattr(statement, "leading_lines", ()))
    first = next((n for n, line in enumerate(lines) if line.comment is not None), len(lines))
    return lines[:first], lines[first:]


def insert_before(tree: Tree, anchor: libcst.BaseStatement, new: libcst.BaseStatement,
                  remove: libcst.BaseStatement | None = None) -> libcst.Module:
    """The module with `new` just before `anchor` in its block (taking the blank lines above anchor, so anchor keeps
    its own comments), and `remove` (a statement of the same block) taken out."""
    block = tree.block(anchor)
    body = body_of(block)
    blank, rest = split_leading(anchor)
    new = new.with_changes(leading_lines=blank + tuple(getattr(new, "leading_lines", ())))
    out = []
    for statement in body:
        if statement is remove:
            continue
        if statement is anchor:
            out.extend((new, anchor.with_changes(leading_lines=rest)))
        else:
            out.append(statement)
    return tree.module.deep_replace(block, block.with_changes(body=out))


def insert_after(tree: Tree, anchor: libcst.BaseStatement, new: libcst.BaseStatement) -> libcst.Module:
    block = tree.block(anchor)
    body = body_of(block)
    at = next(n for n, s in enumerate(body) if s is anchor)
    return tree.module.deep_replace(block, block.with_changes(body=body[:at + 1] + [new] + body[at + 1:]))
