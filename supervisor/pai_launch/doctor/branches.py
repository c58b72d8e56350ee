"""What an if's branches mean for the code after it: a branch that returns or exits leaves the rest of the block
only to the processes that did not take it (`if not distributed: return`), and a branch that made the DDP ranks
exit says "not a DDP rank" where its test holds again. Pure: read from the ast and the names' bindings.
"""

from __future__ import annotations

import ast

from pai_launch.doctor import names
from pai_launch.doctor.env import Env, function_of, name_in
from pai_launch.doctor.flow import Guard
from pai_launch.doctor.guards import NOTHING, Meaning, meaning

EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def terminates(body: list[ast.stmt], env: Env) -> bool:
    """Whether a block never falls through: it ends in return, raise, continue or break, or a call that ends the
    process."""
    last = body[-1] if body else None
    return isinstance(last, EXITS) or ends_process(last, env)


def ends_process(stmt: ast.stmt | None, env: Env | None, depth: int = 0) -> bool:
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
        and bool(found[0].body) and ends_process(found[0].body[-1], found[1], depth + 1)


def implied(stmt: ast.If, env: Env) -> tuple[str, Meaning] | None:
    """`if T: ... if args.distributed: exit()`: where T holds again later, the process is not a DDP rank (it would
    have exited). (the test, what it then implies), or None."""
    for inner in stmt.body:
        if isinstance(inner, ast.If) and terminates(inner.body, env):
            held = meaning(inner.test, True, env)
            flipped = Meaning(*(None if v is None else not v for v in (held.init, held.dist, held.rank0)))
            if flipped != NOTHING:
                return ast.dump(stmt.test), flipped
    return None


def after_leaving(stmt: ast.If, env: Env, dead=lambda test: False) -> Guard | None:
    """What holds after an if/elif/else chain some of whose branches return or exit: what the branches that go on
    have in common (`if "RANK" in os.environ: ... elif "SLURM_PROCID" in os.environ: ... else: return` leaves only
    launched ranks), or None when no branch leaves. `dead(test)`: a branch whose test never holds goes on nowhere."""
    survivors, branches, before, node = [], 0, NOTHING, stmt
    while True:
        branches += 1
        if not terminates(node.body, env) and not dead(node.test):
            survivors.append(before.plus(meaning(node.test, True, env)))
        before = before.plus(meaning(node.test, False, env))
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            continue
        branches += 1
        if not (node.orelse and terminates(node.orelse, env)):
            survivors.append(before)
        break
    if len(survivors) == branches:
        return None
    common = [{getattr(m, field) for m in survivors} for field in ("init", "dist", "rank0")]
    held = Meaning(*(values.pop() if len(values) == 1 else None for values in common))
    return Guard(stmt, False, held, True)
