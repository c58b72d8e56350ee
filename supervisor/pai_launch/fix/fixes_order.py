"""The fixes that put a setting before perforate_model (the capacity test off, the two prompt-free confirmations),
and the unwrapped model for add_validation_score.

A statement is moved only within its own block and only when nothing it reads is assigned between the two places;
otherwise the fix is Unfixable with the reason, never a guess.
"""

from __future__ import annotations

import libcst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import ExpressionContext, ExpressionContextProvider, MetadataWrapper

from pai_launch.doctor import names
from pai_launch.fix import cst
from pai_launch.fix.edit import FixContext, Unfixable

GLOBALS_IMPORT = "from perforatedai import globals_perforatedai as GPA\n"


def _is_perforate(name: str | None) -> bool:
    return names.is_perforate(name) or names.is_training(name, "perforate_model")


def first_perforate(tree: cst.Tree) -> libcst.BaseStatement:
    """The statement of the file's first perforate_model call; Unfixable when the file makes none."""
    call = next(tree.calls(_is_perforate), None)
    if call is None:
        raise Unfixable("perforate_model is not called in this file: make the change where it is called")
    return tree.statement(call)


def _read_names(statement: libcst.CSTNode) -> set[str]:
    return {n.value for n in _nodes(statement) if isinstance(n, libcst.Name)}


def _nodes(node: libcst.CSTNode):
    yield node
    for child in node.children:
        yield from _nodes(child)


def _stored_names(module: libcst.Module, statements: list) -> set[str]:
    contexts = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ExpressionContextProvider)
    stored = set()
    for statement in statements:
        for node in _nodes(statement):
            if isinstance(node, libcst.Name) and contexts.get(node) in (ExpressionContext.STORE, ExpressionContext.DEL):
                stored.add(node.value)
            elif isinstance(node, (libcst.FunctionDef, libcst.ClassDef)):
                stored.add(node.name.value)
            elif isinstance(node, (libcst.Import, libcst.ImportFrom)) and not isinstance(node.names, libcst.ImportStar):
                stored.update(get_full_name_for_node(a.asname.name if a.asname else a.name).split(".")[0]
                              for a in node.names)
    return stored


def move_before(tree: cst.Tree, moved: libcst.BaseStatement, anchor: libcst.BaseStatement) -> libcst.Module:
    """`moved` (after `anchor`, in the same block) moved to just before `anchor`; Unfixable when they are in
    different blocks, or something between them assigns a name `moved` reads."""
    block = tree.block(moved)
    if tree.block(anchor) is not block:
        raise Unfixable(f"line {tree.line(moved)} is not in the same block as perforate_model (line "
                        f"{tree.line(anchor)}): move it before that call by hand")
    body = cst.body_of(block)
    between = body[body.index(anchor):body.index(moved)]
    clash = _read_names(moved) & _stored_names(tree.module, between)
    if clash:
        raise Unfixable(f"line {tree.line(moved)} reads {', '.join(sorted(clash))}, set after perforate_model "
                        f"(line {tree.line(anchor)}): move it by hand")
    _blank, comments = cst.split_leading(moved)
    return cst.insert_before(tree, anchor, moved.with_changes(leading_lines=comments), remove=moved)


def fix_capacity_late(module: libcst.Module, ctx: FixContext) -> libcst.Module:
    """`set_testing_dendrite_capacity(False)` moved to just before the first perforate_model of its block."""
    tree = cst.Tree(module)
    call = tree.call_at(ctx.finding.line, lambda n: names.is_pc_setter(n, "testing_dendrite_capacity")
                        or names.is_training(n, "configure_without_prompts"), "set_testing_dendrite_capacity")
    anchor, moved = first_perforate(tree), tree.statement(call)
    if tree.line(moved) < tree.line(anchor):
        return module
    return move_before(tree, moved, anchor)


def _prompt(setting: str):
    def fix(module: libcst.Module, ctx: FixContext) -> libcst.Module:
        tree = cst.Tree(module)
        anchor = first_perforate(tree)
        if ctx.finding.line is not None:
            call = tree.call_at(ctx.finding.line, lambda n: names.is_pc_setter(n, setting), f"set_{setting}")
            moved = tree.statement(call)
            if tree.block(moved) is tree.block(anchor) and tree.line(moved) > tree.line(anchor):
                return move_before(tree, moved, anchor)
        spelled = cst.globals_name(tree)
        if spelled is None and "GPA" in tree.imports:
            raise Unfixable("the file names something else GPA: add the globals_perforatedai import and the call "
                            "by hand")
        edited = cst.insert_before(tree, anchor, cst.statement_line(f"{spelled or 'GPA'}.pc.set_{setting}(True)\n"))
        return edited if spelled is not None else add_globals_import(cst.Tree(edited))

    return fix


def add_globals_import(tree: cst.Tree) -> libcst.Module:
    """`from perforatedai import globals_perforatedai as GPA` after the file's first top-level perforatedai (or
    pai_launch) import, else after its last top-level import."""
    imports = [s for s in tree.module.body if isinstance(s, libcst.SimpleStatementLine)
               and any(isinstance(small, (libcst.Import, libcst.ImportFrom)) for small in s.body)]
    if not imports:
        raise Unfixable("the file has no top-level import to put the globals_perforatedai import beside")
    ours = [s for s in imports if any(word in libcst.Module([]).code_for_node(s)
                                      for word in ("perforatedai", "pai_launch"))]
    anchor = ours[0] if ours else imports[-1]
    return cst.insert_after(tree, anchor, cst.statement_line(GLOBALS_IMPORT))


def _model_argument(call: libcst.Call) -> libcst.Arg | None:
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if len(positional) > 1:
        return positional[1]
    return next((a for a in call.args if a.keyword is not None and a.keyword.value in ("net", "model")), None)


def fix_wrapped_score(module: libcst.Module, ctx: FixContext) -> libcst.Module:
    """add_validation_score gets `X.module` where doctor reads X as the DDP wrapper on every path, else
    `getattr(X, "module", X)` (a run without DDP passes the model itself)."""
    tree = cst.Tree(module)
    call = tree.call_at(ctx.finding.line, lambda n: names.is_tracker(n, "add_validation_score"), "add_validation_score")
    argument = _model_argument(call)
    if argument is None:
        raise Unfixable("the model argument of add_validation_score is not readable")
    value = argument.value
    if isinstance(value, libcst.Attribute) and value.attr.value == "module" or \
            isinstance(value, libcst.Call) and tree.name(value.func) == "getattr":
        return module
    if not isinstance(value, (libcst.Name, libcst.Attribute)):
        raise Unfixable("the model argument is an expression, not a name: pass its .module by hand")
    code = module.code_for_node(value)
    surely = surely_ddp(ctx)
    text = f"{code}.module" if surely else f'getattr({code}, "module", {code})'
    return module.deep_replace(argument, argument.with_changes(value=libcst.parse_expression(text)))


def surely_ddp(ctx: FixContext) -> bool:
    """Whether doctor reads the model argument at the finding as the DistributedDataParallel wrapper, built with
    no condition, on every path to the call."""
    from pai_launch.doctor.env import guarded_candidates, wrapper_kind
    from pai_launch.doctor.project import Project
    from pai_launch.doctor.walker import walk

    flow = walk(Project(ctx.report.script))
    where = ctx.finding.path
    for event in flow.calls(lambda n: names.is_tracker(n, "add_validation_score")):
        if event.line != ctx.finding.line or (where is not None and event.path != where):
            continue
        node = event.node
        argument = node.args[1] if len(node.args) > 1 else \
            next((k.value for k in node.keywords if k.arg in ("net", "model")), None)
        if argument is None:
            return False
        found = list(guarded_candidates(argument, event.env))
        return bool(found) and all(wrapper_kind(v, scope) == "ddp" and not when for v, scope, when in found)
    return False


FIXERS = {
    "testing-dendrite-capacity-late": fix_capacity_late,
    "prompt-configuration-confirmed": _prompt("configuration_confirmed"),
    "prompt-unwrapped-modules": _prompt("unwrapped_modules_confirmed"),
    "validation-score-wrapped-model": fix_wrapped_score,
}
