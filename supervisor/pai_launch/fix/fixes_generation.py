"""The fixes for how a generation ends and starts: training_complete checked before a restructure ends it, a
restructure that ends it under DDP, the marker from rank 0, a barrier and destroy_process_group before the exit, and
the newest switch_N.pt loaded on a restart.

Like fixes_protocol: pai_launch.training's helpers where the edit's place can read the script's Run, otherwise the
lines minimal_ddp.py has. Guards use `dist.is_initialized()` (true exactly on a DDP rank, whatever the script calls
its own flag) and, for rank 0, the RANK variable PerforatedAI itself decides rank 0 by.
"""

from __future__ import annotations

import libcst as cst

from pai_launch.fix import locate as loc
from pai_launch.fix.edit import FixContext, Fixer, Unfixable

RANK0 = 'int({os}.environ.get("RANK", "0")) == 0'
MARKER = '''with open({os}.path.join({save}, ".training_complete"), "w") as {name}:
    {name}.write("complete\\n")
'''
RESUME = '''if {args}.pai_load_folder:
    {newest} = max({glob}.glob({os}.path.join({args}.pai_load_folder, "switch_*.pt")), key={os}.path.getmtime)
    {model} = {upa}.load_system({model}, {args}.pai_load_folder, {os}.path.basename({newest})[:-3], True){to}
'''


def _score(tree: loc.Tree) -> tuple[cst.SimpleStatementLine, str, str]:
    """The statement `net, restructured, complete = ...add_validation_score(...)`, and its two flags' names."""
    found = []
    for call in loc.calls(tree, lambda c: loc.tail(c) == "add_validation_score"):
        stmt = loc.statement(tree, call)
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
        target = small.targets[0].target if isinstance(small, cst.Assign) and len(small.targets) == 1 else None
        if isinstance(target, cst.Tuple) and len(target.elements) == 3 \
                and all(isinstance(e.value, cst.Name) for e in target.elements[1:]):
            found.append((stmt, target.elements[1].value.value, target.elements[2].value.value))
    return loc.only(found, "`net, restructured, complete = add_validation_score(...)` in the file")


def _mentions(tree: loc.Tree, test: cst.BaseExpression, name: str) -> bool:
    """Whether the condition holds on `name` (a Name not under `not`)."""
    def negated(node):
        return any(isinstance(up, cst.UnaryOperation) and isinstance(up.operator, cst.Not)
                   for up in loc.ancestors(tree, node) if test in (up, *loc.ancestors(tree, up)))
    return any(isinstance(n, cst.Name) and n.value == name and not negated(n)
               for n in [test, *(m for m in tree.position if test in loc.ancestors(tree, m))])


def _if_at(tree: loc.Tree, ctx: FixContext) -> cst.If:
    return loc.only([n for n in tree.position if isinstance(n, cst.If) and loc.line(tree, n) == ctx.finding.line],
                    f"if on line {ctx.finding.line}")


def _earlier(tree: loc.Tree, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
    body = list(tree.parent[stmt].body)
    return body[:body.index(stmt)]


def fix_restructured_first(module: cst.Module, ctx: FixContext) -> cst.Module:
    """`if restructured: (exit) elif complete: ...` becomes `if complete: ... elif restructured: ...`; an `if
    complete:` right after the restructure's if moves before it."""
    tree = loc.read(module)
    _stmt, restructured, complete = _score(tree)
    branch = _if_at(tree, ctx)
    if _mentions(tree, branch.test, complete) or not _mentions(tree, branch.test, restructured):
        return module
    if isinstance(tree.parent[branch], loc.BLOCKS) and any(
            isinstance(s, cst.If) and _mentions(tree, s.test, complete) for s in _earlier(tree, branch)):
        return module
    other = branch.orelse
    if isinstance(other, cst.If) and _mentions(tree, other.test, complete):
        swapped = other.with_changes(orelse=branch.with_changes(orelse=other.orelse, leading_lines=()),
                                     leading_lines=branch.leading_lines)
        return module.deep_replace(branch, swapped)
    follow = loc.sibling(tree, branch, 1) if isinstance(tree.parent[branch], loc.BLOCKS) else None
    if other is None and isinstance(follow, cst.If) and _mentions(tree, follow.test, complete):
        block = tree.parent[branch]
        body = list(block.body)
        at = body.index(branch)
        body[at:at + 2] = [follow.with_changes(leading_lines=branch.leading_lines),
                           branch.with_changes(leading_lines=follow.leading_lines)]
        return module.deep_replace(block, block.with_changes(body=body))
    raise Unfixable("no training_complete check right after the restructure's if to put first")


def _ending(tree: loc.Tree, at: cst.CSTNode) -> tuple[str, list[tuple[str, str]]]:
    """(an if that ends a DDP generation and does nothing elsewhere, the imports it needs)."""
    helper = loc.training_run(tree, at)
    if helper is not None:
        pt, run = helper
        return f"if {run}.distributed:\n    {pt}.end_generation({run})\n", []
    dist = loc.plan_import(tree, "torch.distributed", "dist")
    sys_ = loc.plan_import(tree, "sys", "sys")
    return (f"if {dist}.is_initialized():\n    {dist}.barrier()\n    {dist}.destroy_process_group()\n"
            f"    {sys_}.exit(0)\n"), [("torch.distributed", dist), ("sys", sys_)]


def fix_restructure_no_exit(module: cst.Module, ctx: FixContext) -> cst.Module:
    """The restructure's branch (after the completion check) ends the generation first under DDP; one process or
    DataParallel goes on in it as before."""
    tree = loc.read(module)
    _stmt, _restructured, complete = _score(tree)
    branch = _if_at(tree, ctx)
    first = branch.body.body[0]
    if isinstance(first, cst.If) and ("end_generation" in loc.code(tree, first) or "exit(" in loc.code(tree, first)):
        return module
    up = tree.parent.get(branch)
    after_complete = (f"not {complete}" in loc.code(tree, branch.test)
                      or isinstance(up, cst.If) and up.orelse is branch and _mentions(tree, up.test, complete))
    if not after_complete:
        raise Unfixable("the restructure's branch does not come after the training_complete check")
    ending, imports = _ending(tree, branch)
    body = [*loc.stmts(ending), *branch.body.body]
    return loc.add_imports(module.deep_replace(branch.body, branch.body.with_changes(body=body)), imports)


def _save_folder(tree: loc.Tree, at: cst.CSTNode, ctx: FixContext) -> str:
    """The save folder as code `at` can read: perforate_model's save_name, else the folder doctor read."""
    perforate = loc.calls(tree, lambda c: loc.tail(c) in loc.PERFORATE)
    given = [a.value for c in perforate for a in c.args if a.keyword and a.keyword.value == "save_name"]
    if len({loc.code(tree, g) for g in given}) == 1:
        root = given[0]
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(given[0], cst.SimpleString) or isinstance(root, cst.Name) and _readable(tree, root.value, at):
            return loc.code(tree, given[0])
    elif not given and not perforate and ctx.report.save_name is not None:
        return repr(ctx.report.save_name)
    raise Unfixable("the save folder is not a name the completion check can read")


def _readable(tree: loc.Tree, name: str, at: cst.CSTNode) -> bool:
    """Whether `name` is bound at module level or in `at`'s own def (so `at` reads that binding)."""
    return any(isinstance(n, cst.Name) and n.value == name and isinstance(tree.parent.get(n), (cst.AssignTarget,
               cst.Param)) and loc.scope(tree, n) in (None, loc.scope(tree, at)) for n in tree.position)


def fix_marker(module: cst.Module, ctx: FixContext) -> cst.Module:
    """Rank 0 writes SAVE/.training_complete as soon as add_validation_score says training is complete."""
    tree = loc.read(module)
    if any(isinstance(n, cst.SimpleString) and ".training_complete" in n.value for n in tree.position) \
            or loc.calls(tree, lambda c: loc.tail(c) == "mark_complete"):
        return module
    stmt, _restructured, complete = _score(tree)
    save = _save_folder(tree, stmt, ctx)
    helper = loc.training_run(tree, stmt)
    if helper is not None:
        write, imports = f"{helper[0]}.mark_complete({helper[1]}, {save})\n", []
    else:
        os_ = loc.plan_import(tree, "os", "os")
        imports = [("os", os_)]
        name = next(n for n in ("marker", "marker_file", "done_marker") if not loc.uses_name(tree, n))
        inner = "".join("    " + s for s in MARKER.format(os=os_, save=save, name=name).splitlines(True))
        write = f"if {RANK0.format(os=os_)}:\n{inner}"
    follow = loc.sibling(tree, stmt, 1)
    if isinstance(follow, cst.If) and loc.code(tree, follow.test) == complete:
        body = [*loc.stmts(write), *follow.body.body]
        module = module.deep_replace(follow.body, follow.body.with_changes(body=body))
    else:
        block = "".join("    " + s for s in write.splitlines(True))
        module = loc.insert(module, tree, stmt, loc.stmts(f"if {complete}:\n{block}"), after=True)
    return loc.add_imports(module, imports)


def _generation_end(wanted: str) -> Fixer:
    def fix(module: cst.Module, ctx: FixContext) -> cst.Module:
        tree = loc.read(module)
        here = [n for n in tree.position if isinstance(n, cst.SimpleStatementLine) and loc.line(tree, n)
                == ctx.finding.line
                and isinstance(tree.parent.get(n), loc.BLOCKS)]
        leave = loc.only(here, f"statement on line {ctx.finding.line}")
        before = loc.sibling(tree, leave, -1)
        if isinstance(before, cst.If) and f"{wanted}" in loc.code(tree, before.body):
            return module
        same = {f.id for f in ctx.report.findings if f.line == ctx.finding.line and f.path == ctx.finding.path}
        missing = [c for c in ("barrier", "destroy_process_group")
                   if f"generation-end-{c.split('_')[0]}" in same or c == wanted]
        dist = loc.plan_import(tree, "torch.distributed", "dist")
        destroys = loc.calls(tree, lambda c: loc.tail(c) == "destroy_process_group"
                             and loc.line(tree, c) < ctx.finding.line and tree.parent[leave] in loc.ancestors(tree, c))
        if missing == ["barrier"] and destroys:
            module = loc.insert(module, tree, loc.bare_call(tree, destroys[-1]), loc.stmts(f"{dist}.barrier()\n"),
                                after=False)
        else:
            calls = "".join(f"    {dist}.{c}()\n" for c in missing)
            module = loc.insert(module, tree, leave, loc.stmts(f"if {dist}.is_initialized():\n{calls}"), after=False)
        return loc.add_imports(module, [("torch.distributed", dist)])
    fix.__doc__ = f"dist.{wanted}() before the exit that ends the generation (with the other one where it is missing)."
    return fix


def fix_resume(module: cst.Module, ctx: FixContext) -> cst.Module:
    """On a restart (--pai_load_folder), the model loaded from the newest switch_N.pt right after perforate_model,
    so the optimizer built after it steps the loaded parameters."""
    tree = loc.read(module)
    if loc.calls(tree, lambda c: loc.tail(c) in ("load_system", "load_newest")):
        return module
    call = loc.only(loc.calls(tree, lambda c: loc.tail(c) in loc.PERFORATE), "perforate_model() calls in the file")
    stmt = loc.statement(tree, call)
    small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)):
        raise Unfixable("perforate_model's result is not assigned to one name")
    model = small.targets[0].target.value
    built = loc.calls(tree, lambda c: loc.tail(c) == "setup_optimizer" and loc.scope(tree, c) is loc.scope(tree, stmt))
    if any(loc.line(tree, c) < loc.line(tree, stmt) for c in built):
        raise Unfixable("the optimizer is built before perforate_model")
    args = loc.parsed_args(tree, stmt, "pai_load_folder")
    if args is None:
        raise Unfixable("no --pai_load_folder that perforate_model's place can read")
    helper = loc.training_run(tree, stmt)
    if helper is not None:
        lines = f"{model} = {helper[0]}.load_newest({helper[1]}, {model}, {args}.pai_load_folder)\n"
        imports = []
    else:
        value = small.value
        to = ""
        if isinstance(value, cst.Call) and loc.tail(value) == "to":
            to = ".to(" + ", ".join(loc.code(tree, a) for a in value.args) + ")"
        newest = next((n for n in ("newest", "newest_switch") if not loc.uses_name(tree, n)), None)
        if newest is None:
            raise Unfixable("the names newest and newest_switch are taken")
        os_ = loc.plan_import(tree, "os", "os")
        glob = loc.plan_import(tree, "glob", "glob")
        upa = loc.plan_import(tree, "perforatedai.utils_perforatedai", "UPA")
        imports = [("os", os_), ("glob", glob), ("perforatedai.utils_perforatedai", upa)]
        lines = RESUME.format(args=args, newest=newest, glob=glob, os=os_, model=model, upa=upa, to=to)
    module = loc.insert(module, tree, stmt, loc.stmts(lines), after=True)
    return loc.add_imports(module, imports)


FIXERS: dict[str, Fixer] = {
    "restructured-before-complete": fix_restructured_first,
    "restructure-no-exit": fix_restructure_no_exit,
    "marker-missing": fix_marker,
    "generation-end-barrier": _generation_end("barrier"),
    "generation-end-destroy": _generation_end("destroy_process_group"),
    "resume-missing": fix_resume,
}
