"""How the run's children start, are signalled and are killed: real processes (PROCESSES), or, in a test's world,
stand-ins that play a history in this process and report through the same callback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pai_launch.core.observations import Role
from pai_launch.linux import procs
from pai_launch.supervise.children.agent_process import Agent
from pai_launch.supervise.children.plain_process import PlainProcess
from pai_launch.supervise.job.plan import Command
from pai_launch.supervise.outputs import liveline


def start_plain_process(role: Role, command: Command, env: dict[str, str], report: Callable[[object], None],
                        live: liveline.LiveLine | None) -> PlainProcess:
    return PlainProcess(role, command, env, report, live=live).start()


def start_agent_process(python: str, workdir: Path, env: dict[str, str], report: Callable[[object], None],
                        agent_args: tuple[str, ...], live: liveline.LiveLine | None) -> Agent:
    return Agent(python, workdir, env, report, agent_args=agent_args, live=live).start()


def signal_process(pid: int, signum: int) -> bool:
    """`signum` to the process group `pid` leads (our children are session leaders), else to `pid` alone."""
    return procs.signal_group(pid, signum) or procs.signal_pid(pid, signum)


def kill_processes(descendants: procs.Descendants, spare: frozenset[int]) -> int:
    return descendants.kill_all(spare)


@dataclass(frozen=True)
class Spawn:
    """How the table starts its two kinds of child, signals the run's processes and kills them all: real processes,
    or (a test's world) stand-ins that play a history in this process and report through the same callback, with
    the same interface."""

    plain: Callable[[Role, Command, dict[str, str], Callable[[object], None], liveline.LiveLine | None], PlainProcess]
    agent: Callable[[str, Path, dict[str, str], Callable[[object], None], tuple[str, ...], liveline.LiveLine | None],
                    Agent]
    signal: Callable[[int, int], bool] = signal_process
    #: SIGKILL every descendant but the spared (pids); how many were alive.
    kill: Callable[[procs.Descendants, frozenset[int]], int] = kill_processes


PROCESSES = Spawn(plain=start_plain_process, agent=start_agent_process)
