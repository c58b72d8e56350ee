"""What a run acts on, made once where the run is composed and handed to the Runner: its process table (the processes
it starts, signals and sweeps) and its notifier (systemd's readiness, watchdog and status line).

pai-launch's own composition root makes the real ones around its whole process; a test that supervises a run inside
its own process makes them around the run alone (the test host's other processes are not the run's), or hands in
stand-ins that play a history without processes.
"""

from __future__ import annotations

import os
import queue
from dataclasses import dataclass

from pai_launch.placement.spec import LaunchSpec
from pai_launch.supervise.children.proctable import ProcessTable
from pai_launch.supervise.children.spawn import PROCESSES, Spawn
from pai_launch.supervise.outputs.notify import Notifier, child_env


@dataclass(frozen=True)
class World:
    table: ProcessTable
    notifier: Notifier


def make_world(spec: LaunchSpec, env: dict[str, str], inbox: queue.SimpleQueue,
               others: frozenset[int] = frozenset(), spawn: Spawn | None = None) -> World:
    """The world of a run: what its threads report goes to `inbox`. `others`: processes already under this process
    that the run must leave alone (none where pai-launch is the process: everything under it is the run's); `spawn`:
    how its children start (real processes, unless a test plays a history)."""
    notifier = Notifier(env, os.getpid())
    table = ProcessTable(python=spec.python, workdir=spec.workdir, env=child_env(env), report=inbox.put,
                         log_dir=spec.log_dir, agent_args=spec.agent_args, others=others,
                         spawn=spawn or PROCESSES)
    return World(table=table, notifier=notifier)
