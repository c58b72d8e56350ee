"""The walk's result: the calls the script makes, each an Event with the ifs and loops around it, and the Flow that
holds them in order, with the questions every check asks of it (is the script DDP, does a call run one rank at a
time). doctor.walker builds it; the checks read it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from pai_launch.doctor import names
from pai_launch.doctor.budget import UNLIMITED, Deadline
from pai_launch.doctor.env import Env, name_in
from pai_launch.doctor.guards import NOTHING, Meaning, is_script_main, is_turn
from pai_launch.doctor.model import Unresolved
from pai_launch.doctor.project import Module


@dataclass(frozen=True)
class Guard:
    """An if around an event: the branch the event is in (positive: the if's body) and what that says about the
    process."""

    node: ast.AST
    positive: bool
    meaning: Meaning
    leaves: bool = False  # the code after `if TEST: return/exit`: it runs whenever the script goes on


@dataclass(frozen=True)
class Event:
    """One thing the script does: kind "call" (name: dotted callee), "marker" (writes .training_complete),
    "break", "return", "exit" (raise SystemExit), "assign" (name: the attribute assigned) or "unwrap" (`NAME =
    X.module`; name: the name assigned)."""

    order: int
    kind: str
    name: str | None
    node: ast.AST
    guards: tuple[Guard, ...]
    loops: tuple[ast.AST, ...]
    serialized: bool
    depth: int
    env: Env
    detached: bool = False

    @property
    def line(self) -> int:
        return getattr(self.node, "lineno", 0)

    @property
    def path(self) -> str | None:
        """The file the event is in, as the report shows it."""
        source = self.env.file()
        return source.path if source is not None else None

    @property
    def mode(self) -> Meaning:
        total = NOTHING
        for guard in self.guards:
            total = total.plus(guard.meaning)
        return total

    def surely_reached(self, also=lambda guard: False) -> bool:
        """Whether doctor reads every condition on the way here (or `also` accepts it), so that a finding about
        this event is certain: not in a function walked on its own, and each if's test understood."""
        return not self.detached and all(g.meaning != NOTHING or g.leaves or also(g)
                                         or (g.positive and is_script_main(g.node.test)) for g in self.guards)

    def under(self, node: ast.AST) -> bool:
        return any(guard.node is node and guard.positive for guard in self.guards)

    def is_exit(self) -> bool:
        """sys.exit() and the like, raise SystemExit, or a return from the function the module calls on its own
        (main(); a helper's return of a value to the module is no event)."""
        return self.kind == "exit" or (self.kind == "call" and names.is_exit(self.name)) \
            or (self.kind == "return" and self.depth == 1)


@dataclass
class Flow:
    """The walk's result: the events in order, the files read, every import (local name -> dotted, all files), the
    argparse options (dest -> default), the string constants, and the calls it could not see into; and the check's
    deadline, which every search of the events asks."""

    modules: list[Module]
    imports: dict[str, str]
    events: list[Event] = field(default_factory=list)
    options: dict[str, object] = field(default_factory=dict)
    strings: set[str] = field(default_factory=set)
    unresolved: list[Unresolved] = field(default_factory=list)
    deadline: Deadline = field(default=UNLIMITED, repr=False, compare=False)

    def name_of(self, expr: ast.AST, env: Env | None = None) -> str | None:
        """The dotted name of `expr`, with the imports of the file `env` belongs to (the entry script's without)."""
        return name_in(expr, env) if env is not None else names.dotted(expr, self.modules[0].imports)

    def calls(self, predicate) -> list[Event]:
        self.deadline.check()
        return [e for e in self.events if e.kind == "call" and predicate(e.name)]

    def taken_in_turn(self, event: Event) -> bool:
        """Whether the ranks make this call one at a time: through in_turn, or in a loop over the ranks whose
        every turn ends in a barrier (`for r in range(world): if r == rank: ...; dist.barrier()`)."""
        if event.serialized:
            return True
        barriers = self.calls(names.is_barrier)
        for loop in event.loops:
            inside = {id(node) for node in ast.walk(loop)}
            turns = {id(g.node) for g in event.guards
                     if id(g.node) in inside and g.positive and is_turn(g.node.test, event.env)}
            for barrier in barriers:
                if turns and loop in barrier.loops and not turns & {id(g.node) for g in barrier.guards}:
                    return True
        return False

    def is_ddp(self) -> bool:
        """Whether the script runs as DDP ranks: it wraps in DistributedDataParallel or starts a process group."""
        return bool(self.calls(lambda n: names.is_ddp(n) or names.is_dist(n, "init_process_group")
                               or names.is_training(n, "wrap_ddp") or names.is_training(n, "start")))
