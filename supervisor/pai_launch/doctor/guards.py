"""What an `if` around a call says about the process that makes it: the init run, a DDP rank, rank 0.

Read from the names in the condition (`args.perforate_model_parallel`, `run.init_run`, `distributed`, `args.rank
== 0`, `dist.get_rank() == 0`, `is_main_process()`, `world_size > 1`), followed back through assignments, so that
`init = args.perforate_model_parallel; if not init:` reads as "not the init run".
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Callable

from pai_launch.doctor.env import Env, candidates

INIT = re.compile(r"perforate_model_parallel|^init_run$|^init_mode$|^is_init(_run)?$|^pai_init$")
DIST = re.compile(r"distributed|ddp|^is_dist$|^use_dist$|^dist_mode$", re.IGNORECASE)
WORLD = re.compile(r"world_size|^world$|^nprocs?$|^num_gpus$|^ngpus$", re.IGNORECASE)
RANK = re.compile(r"(^|_)rank$|^rank", re.IGNORECASE)
MAIN = re.compile(r"^(is_)?(main|master)(_process|_rank)?$|^is_rank_?(0|zero)$|^rank_?(0|zero)$", re.IGNORECASE)


@dataclass(frozen=True)
class Meaning:
    """True/False: the condition holds only in (or only outside) that kind of process; None: it says nothing."""

    init: bool | None = None
    dist: bool | None = None
    rank0: bool | None = None

    def plus(self, other: "Meaning") -> "Meaning":
        pick = lambda a, b: b if b is not None else a  # noqa: E731
        return Meaning(pick(self.init, other.init), pick(self.dist, other.dist), pick(self.rank0, other.rank0))


NOTHING = Meaning()


def _word(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Call):
        return _word(expr.func)
    return None


def _kind(expr: ast.AST, env: Env | None, depth: int = 0) -> str | None:
    """"init", "dist", "world", "rank" or "main" for what the expression names, following assignments."""
    word = _word(expr) or ""
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
        word = str(expr.slice.value)  # os.environ["RANK"]
    if isinstance(expr, ast.Call) and word == "get" and expr.args and isinstance(expr.args[0], ast.Constant):
        word = str(expr.args[0].value)  # os.environ.get("RANK")
    if isinstance(expr, ast.Call) and word in ("int", "bool") and expr.args:
        return _kind(expr.args[0], env, depth + 1)
    if INIT.search(word):
        return "init"
    if word in ("is_initialized",) or DIST.search(word):
        return "dist"
    if word in ("get_world_size",) or WORLD.search(word):
        return "world"
    if MAIN.search(word):
        return "main"
    if word == "get_rank" or RANK.search(word):
        return "rank"
    if isinstance(expr, ast.Name) and depth < 4:
        for value, scope in candidates(expr, env):
            if value is not expr:
                return _kind(value, scope, depth + 1)
    return None


def _number(expr: ast.AST) -> int | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int):
        return expr.value
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub) and isinstance(expr.operand, ast.Constant):
        return -expr.operand.value
    return None


def _compare(node: ast.Compare, env: Env | None) -> Meaning:
    if len(node.ops) != 1:
        return NOTHING
    left, op, right = node.left, node.ops[0], node.comparators[0]
    if isinstance(left, ast.Constant) and left.value in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "SLURM_PROCID") \
            and isinstance(op, (ast.In, ast.NotIn)):
        return Meaning(dist=isinstance(op, ast.In))  # a launcher sets them; the init run has none
    kind, number = _kind(left, env), _number(right)
    if number is None:
        kind, number = _kind(right, env), _number(left)
    if kind == "rank" and number == 0 and isinstance(op, (ast.Eq, ast.Is)):
        return Meaning(rank0=True)
    if kind == "rank" and number == 0 and isinstance(op, (ast.NotEq, ast.Gt, ast.IsNot)):
        return Meaning(rank0=False)
    if kind == "rank" and number == -1:  # `local_rank != -1`: -1 is the usual "not launched by torchrun"
        if isinstance(op, (ast.NotEq, ast.Gt, ast.IsNot)):
            return Meaning(dist=True)
        if isinstance(op, (ast.Eq, ast.Is)):
            return Meaning(dist=False)
    if kind == "rank" and isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
        values = {_number(e) for e in right.elts}
        return Meaning(rank0=True) if 0 in values and values <= {0, -1} else NOTHING
    if kind == "world" and number is not None:
        if isinstance(op, ast.Gt) and number >= 1 or isinstance(op, (ast.NotEq,)) and number == 1:
            return Meaning(dist=True)
        if isinstance(op, (ast.Eq, ast.LtE)) and number == 1 or isinstance(op, ast.Lt) and number == 2:
            return Meaning(dist=False)
    return NOTHING


def meaning(test: ast.AST, positive: bool, env: Env | None) -> Meaning:
    """What it says about the process when `test` is `positive` (True for the if-body, False for the else)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return meaning(test.operand, not positive, env)
    if isinstance(test, ast.BoolOp):
        joined = isinstance(test.op, ast.And) == positive  # every term holds the same way
        if not joined:
            return NOTHING
        total = NOTHING
        for value in test.values:
            total = total.plus(meaning(value, positive, env))
        return total
    if isinstance(test, ast.Compare):
        found = _compare(test, env)
        if found == NOTHING:
            return NOTHING
        flip: Callable[[bool | None], bool | None] = lambda v: v if v is None or positive else not v  # noqa: E731
        return Meaning(flip(found.init), flip(found.dist), flip(found.rank0))
    kind = _kind(test, env)
    if kind == "init":
        return Meaning(init=positive, dist=False) if positive else Meaning(init=False)
    if kind == "dist":
        return Meaning(dist=positive)
    if kind == "main":
        return Meaning(rank0=positive)
    if kind == "rank":  # `if rank:` holds on every rank but 0
        return Meaning(rank0=not positive)
    return NOTHING


def is_turn(test: ast.AST, env: Env | None) -> bool:
    """Whether the condition picks one rank (`turn == rank`, `r == dist.get_rank()`): a turn in a loop over ranks."""
    return any(isinstance(node, ast.Compare)
               and any(_kind(side, env) == "rank" for side in [node.left, *node.comparators])
               for node in ast.walk(test))


def is_script_main(test: ast.AST) -> bool:
    """`__name__ == "__main__"`: true whenever the script is run, so it says nothing and hides nothing."""
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) \
        and {ast.unparse(test.left), ast.unparse(test.comparators[0])} == {"__name__", "'__main__'"}
