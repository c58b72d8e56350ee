"""The fixes for the protocol's own edits: PerforatedAI's file-writing calls one rank at a time, the init run kept off
the process group, and its settings saved and the process ended after the first backward pass.

Where the file imports pai_launch.training and the edit's place can read the Run its start() returned, the edit uses
its helpers (pt.in_turn(run, ...), pt.init_run_done(run)); otherwise it writes the few lines by hand, as
tests/doctor_scripts/good/minimal_ddp.py does: pt.start would start a second process group beside the script's own,
so the helpers are never brought into a script that has no Run. FIXERS (all ids) joins fixes_generation's.
"""

from __future__ import annotations

import libcst as cst

from pai_launch.fix import fixes_generation
from pai_launch.fix import locate as loc
from pai_launch.fix.edit import FixContext, Fixer, Unfixable

TURN = "in_turn"
TURN_DEF = '''def {name}(fn):
    """fn() on one rank at a time, rank 0 first, a barrier after each turn: PerforatedAI writes files the other
    ranks read (pai-launch doctor --fix)."""
    if not {dist}.is_initialized():
        return fn()
    result = None
    for turn in range({dist}.get_world_size()):
        if turn == {dist}.get_rank():
            result = fn()
        {dist}.barrier()
    return result
'''


def _is_turn_call(node: cst.CSTNode | None) -> bool:
    return isinstance(node, cst.Call) and loc.tail(node) in (TURN, "pai_in_turn")


def _in_turn_already(tree: loc.Tree, call: cst.Call) -> bool:
    lam = tree.parent.get(call)
    return isinstance(lam, cst.Lambda) and _is_turn_call(tree.parent.get(tree.parent.get(lam)))


def _turn_name(tree: loc.Tree) -> tuple[str, bool]:
    """The name of the script's in_turn(fn), and whether it is still to be written."""
    for name in (TURN, "pai_in_turn"):
        defs = [d for d in tree.module.body if isinstance(d, cst.FunctionDef) and d.name.value == name]
        if defs and len(defs[0].params.params) == 1 and "barrier" in loc.code(tree, defs[0]):
            return name, False
        if not defs and name not in tree.top_imports and not loc.uses_name(tree, name):
            return name, True
    raise Unfixable("the script already has another in_turn and pai_in_turn")


def _turn(module: cst.Module, tree: loc.Tree, call: cst.Call) -> cst.Module:
    """The module with `call` made one rank at a time."""
    if isinstance(loc.scope(tree, call), cst.ClassDef):
        raise Unfixable("the call is in a class body, where a lambda cannot read the class's names")
    if any(isinstance(n, (cst.Await, cst.Yield)) for n in tree.position if call in loc.ancestors(tree, n)):
        raise Unfixable("the call awaits or yields: it cannot move into a lambda")
    lam = cst.Lambda(params=cst.Parameters(), body=call)
    helper = loc.training_run(tree, call)
    if helper is not None:
        pt, run = helper
        wrapped = cst.Call(func=cst.parse_expression(f"{pt}.in_turn"), args=[cst.Arg(cst.Name(run)), cst.Arg(lam)])
        return module.deep_replace(call, wrapped)
    name, missing = _turn_name(tree)
    if missing and loc.scope(tree, call) is None and loc.before_imports(tree, call):
        raise Unfixable("the call runs before the script's last import, where in_turn would be written")
    dist = loc.plan_import(tree, "torch.distributed", "dist") if missing else ""
    module = module.deep_replace(call, cst.Call(func=cst.Name(name), args=[cst.Arg(lam)]))
    if not missing:
        return module
    module = loc.add_imports(module, [("torch.distributed", dist)])
    (define,) = loc.stmts(TURN_DEF.format(name=name, dist=dist))
    module = loc.after_imports(module, [define.with_changes(leading_lines=[cst.EmptyLine()] * 2)])
    body = list(module.body)
    at = next(i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == name) + 1
    if at < len(body) and len(body[at].leading_lines) < 2:  # two blank lines after a def, as before one
        lines = list(body[at].leading_lines)
        body[at] = body[at].with_changes(leading_lines=[cst.EmptyLine()] * (2 - len(lines)) + lines)
    return module.with_changes(body=body)


def _turn_fixer(*callees: str) -> Fixer:
    def fix(module: cst.Module, ctx: FixContext) -> cst.Module:
        tree = loc.read(module)
        call = loc.only(loc.calls(tree, lambda c: loc.tail(c) in callees, ctx.finding.line),
                        f"{callees[0]}() call on line {ctx.finding.line}")
        return module if _in_turn_already(tree, call) else _turn(module, tree, call)
    fix.__doc__ = f"{callees[0]}() through in_turn: every rank calls it, one at a time."
    return fix


def fix_score_rank0_only(module: cst.Module, ctx: FixContext) -> cst.Module:
    """`if rank == 0: net, r, c = add_validation_score(...)`: every rank scores, in turn (the others' trackers stay
    in step and their flags are their own)."""
    tree = loc.read(module)
    call = loc.only(loc.calls(tree, lambda c: loc.tail(c) == "add_validation_score", ctx.finding.line),
                    f"add_validation_score() call on line {ctx.finding.line}")
    stmt = loc.statement(tree, call)
    if _in_turn_already(tree, call) and loc.mode(tree, stmt).rank0 is not True:
        return module
    block = tree.parent[stmt]
    branch = tree.parent.get(block)
    if not (isinstance(branch, cst.If) and branch.body is block and branch.orelse is None
            and loc.meaning(tree, branch.test).rank0 is True and isinstance(tree.parent[branch], loc.BLOCKS)):
        raise Unfixable("the score is not alone under a rank-0 if without else")
    if len(block.body) != 1:
        raise Unfixable("the rank-0 block does more than add the score: every rank would do it too")
    for arg in call.args:
        for name in (n.value for n in tree.position if isinstance(n, cst.Name) and arg in loc.ancestors(tree, n)):
            sets = [n for n in tree.position if isinstance(n, cst.Name) and n.value == name
                    and any(isinstance(up, cst.AssignTarget) for up in loc.ancestors(tree, n))]
            if sets and all(loc.mode(tree, s).rank0 is True for s in sets):
                raise Unfixable(f"{name} is computed on rank 0 only: the other ranks have no score")
    lifted = stmt.with_changes(leading_lines=branch.leading_lines)
    module = module.deep_replace(branch, lifted)
    tree = loc.read(module)
    call = loc.only(loc.calls(tree, lambda c: loc.tail(c) == "add_validation_score" and c.deep_equals(call)),
                    "such add_validation_score() call")
    return _turn(module, tree, call)


def _dist_of(tree: loc.Tree, call: cst.Call) -> str:
    if isinstance(call.func, cst.Attribute) and (loc.full_name(tree, call.func) or "").startswith("torch.distributed."):
        return loc.code(tree, call.func.value)
    found = loc.alias(tree, "torch.distributed")
    if found is None:
        raise Unfixable("the script reaches torch.distributed under no module-level name")
    return found


def _is_initialized(test: cst.BaseExpression) -> bool:
    return isinstance(test, cst.Call) and loc.tail(test) == "is_initialized"


def fix_init_barrier(module: cst.Module, ctx: FixContext) -> cst.Module:
    """A collective under `if dist.is_initialized():` (the init run has no process group). Only a call that is a
    statement of its own: a value such as get_rank() in a larger statement has no one default that is right."""
    tree = loc.read(module)
    call = loc.only(loc.calls(tree, lambda c: (loc.full_name(tree, c.func) or "").startswith("torch.distributed.")
                              and loc.tail(c) != "is_initialized", ctx.finding.line),
                    f"torch.distributed call on line {ctx.finding.line}")
    if any(_is_initialized(branch.test) and positive for branch, positive in loc.guards_of(tree, call)):
        return module
    dist = _dist_of(tree, call)
    stmt = loc.bare_call(tree, call)
    return _guard(module, stmt, f"{dist}.is_initialized()")


def _guard(module: cst.Module, stmt: cst.SimpleStatementLine, test: str) -> cst.Module:
    inner = stmt.with_changes(leading_lines=())
    branch = cst.If(test=cst.parse_expression(test), body=cst.IndentedBlock(body=[inner]),
                    leading_lines=stmt.leading_lines)
    return module.deep_replace(stmt, branch)


def fix_init_process_group(module: cst.Module, ctx: FixContext) -> cst.Module:
    """init_process_group kept out of the init run: under `if not args.perforate_model_parallel:` where the call
    can read the flag, else `if "RANK" in os.environ:` (a launcher sets RANK) when the call takes its rank from
    there."""
    tree = loc.read(module)
    call = loc.only(loc.calls(tree, lambda c: loc.tail(c) == "init_process_group", ctx.finding.line),
                    f"init_process_group() call on line {ctx.finding.line}")
    here = loc.mode(tree, call)
    if here.init is False or here.dist is True:
        return module
    stmt = loc.bare_call(tree, call)
    args = loc.parsed_args(tree, call, "perforate_model_parallel")
    if args is not None:
        return _guard(module, stmt, f"not {args}.perforate_model_parallel")
    explicit = len(call.args) > 4 or any(a.keyword and a.keyword.value in ("rank", "init_method") for a in call.args)
    os_name = loc.alias(tree, "os")
    if explicit or os_name is None:
        raise Unfixable("no --perforate_model_parallel the call can read, and it does not take its rank from RANK")
    return _guard(module, stmt, f'"RANK" in {os_name}.environ')


def _init_lines(tree: loc.Tree, at: cst.CSTNode) -> tuple[str, list[str], list[tuple[str, str]]]:
    """(the init run's test at `at`, the statements that end it, the imports they need)."""
    helper = loc.training_run(tree, at)
    if helper is not None:
        pt, run = helper
        return f"{run}.init_run", [f"{pt}.init_run_done({run})"], []
    args = loc.parsed_args(tree, at, "perforate_model_parallel")
    if args is None:
        raise Unfixable("no --perforate_model_parallel the training loop can read")
    gpa = loc.plan_import(tree, "perforatedai.globals_perforatedai", "GPA")
    sys_ = loc.plan_import(tree, "sys", "sys")
    return (f"{args}.perforate_model_parallel", [f"{gpa}.pai_tracker.save_tracker_settings()", f"{sys_}.exit(0)"],
            [("perforatedai.globals_perforatedai", gpa), ("sys", sys_)])


def _backward(tree: loc.Tree) -> cst.SimpleStatementLine:
    call = loc.only(loc.calls(tree, lambda c: loc.tail(c) == "backward"), "backward() calls in the file")
    return loc.bare_call(tree, call)


def _saves(tree: loc.Tree) -> list[cst.Call]:
    return loc.calls(tree, lambda c: loc.tail(c) in ("save_tracker_settings", "init_run_done"))


def fix_init_not_saved(module: cst.Module, ctx: FixContext) -> cst.Module:
    """After the (one) backward pass: in the init run, save the tracker settings and exit 0; into the init block
    that already follows it, where there is one."""
    tree = loc.read(module)
    if _saves(tree):
        return module
    back = _backward(tree)
    test, ending, imports = _init_lines(tree, back)
    follow = loc.sibling(tree, back, 1)
    if isinstance(follow, cst.If) and loc.meaning(tree, follow.test).init is True:
        body = [*loc.stmts(ending[0] + "\n"), *follow.body.body]
        module = module.deep_replace(follow.body, follow.body.with_changes(body=body))
    else:
        block = "".join(f"    {s}\n" for s in ending)
        module = loc.insert(module, tree, back, loc.stmts(f"if {test}:\n{block}"), after=True)
    return loc.add_imports(module, imports)


def _init_save(tree: loc.Tree, ctx: FixContext) -> cst.SimpleStatementLine:
    call = loc.only(loc.calls(tree, lambda c: loc.tail(c) == "save_tracker_settings", ctx.finding.line),
                    f"save_tracker_settings() call on line {ctx.finding.line}")
    stmt = loc.bare_call(tree, call)
    if loc.mode(tree, stmt).init is not True:
        raise Unfixable("save_tracker_settings() is not under the init run's flag")
    return stmt


def fix_init_no_exit(module: cst.Module, ctx: FixContext) -> cst.Module:
    """sys.exit(0) right after the init run's save_tracker_settings()."""
    tree = loc.read(module)
    save = _init_save(tree, ctx)
    follow = loc.sibling(tree, save, 1)
    if follow is not None and "exit(" in loc.code(tree, follow):
        return module
    sys_ = loc.plan_import(tree, "sys", "sys")
    module = loc.insert(module, tree, save, loc.stmts(f"{sys_}.exit(0)\n"), after=True)
    return loc.add_imports(module, [("sys", sys_)])


def fix_init_before_backward(module: cst.Module, ctx: FixContext) -> cst.Module:
    """The init run's block (save, exit) moved to right after the one backward pass, in the same def."""
    tree = loc.read(module)
    save = _init_save(tree, ctx)
    back = _backward(tree)
    if loc.line(tree, back) < loc.line(tree, save):
        return module
    block = next((b for b, positive in loc.guards_of(tree, save) if positive and loc.meaning(tree, b.test).init), None)
    if block is None:
        raise Unfixable("save_tracker_settings() is in the else of an if on the init run")
    if block.orelse is not None or not isinstance(tree.parent[block], loc.BLOCKS):
        raise Unfixable("the init run's if has an else or stands in a one-line block")
    if loc.scope(tree, block) is not loc.scope(tree, back) or block in loc.ancestors(tree, back):
        raise Unfixable("the backward pass is in another function than the init run's block")
    if not all(isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Expr) for s in block.body.body):
        raise Unfixable("the init run's block does more than save, print and exit")
    if len(tree.parent[block].body) == 1:
        raise Unfixable("the init run's block is all its block holds")
    moved = block.with_changes(leading_lines=())
    module = loc.insert(module, tree, back, [moved], after=True)
    tree = loc.read(module)
    first = min((n for n in tree.position if isinstance(n, cst.If) and n.deep_equals(block)),
                key=lambda n: loc.line(tree, n))
    parent = tree.parent[first]
    body = [s for s in parent.body if s is not first]
    return module.deep_replace(parent, parent.with_changes(body=body))


FIXERS: dict[str, Fixer] = {
    "perforate-model-race": _turn_fixer(*loc.PERFORATE),
    "validation-score-race": _turn_fixer("add_validation_score"),
    "validation-score-rank0-only": fix_score_rank0_only,
    "init-barrier-unguarded": fix_init_barrier,
    "init-process-group-unguarded": fix_init_process_group,
    "init-settings-not-saved": fix_init_not_saved,
    "init-no-exit": fix_init_no_exit,
    "init-exit-before-backward": fix_init_before_backward,
    **fixes_generation.FIXERS,
}
