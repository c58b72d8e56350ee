"""What the agent's request reader tells the generation running meanwhile, as one object per agent process.

The reader hears the supervisor mid-generation (agent.main): a generation cancelled before its workers start, and
the job's stop that this node's pai-launch is raising; the parent-death handler says when that pai-launch is gone.
The generation reads them (agent.generation, agent.multinode), and the abandon signal's handler may interrupt the
main thread only while it is inside torch's launcher. Kept in one object that agent.main makes and hands down, so
no module holds state and each test makes its own.
"""

from __future__ import annotations

import threading


class Abandoned(BaseException):
    """Raised in the main thread inside elastic_launch once the generation's result is out (BaseException: torch's
    `except Exception` clauses must not swallow it; its `finally` clauses still clean up)."""


class AgentControl:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled: set[int] = set()
        self._stop: tuple[int, str] | None = None
        #: Set while the main thread runs torch's launcher: only then may the abandon signal interrupt it.
        self.in_torch = threading.Event()
        #: This agent's pai-launch is gone (the parent-death signal): the agent is killing its workers on its way
        #: out, so their deaths are not the generation's outcome. Set once, by the main thread's signal handler.
        self.parent_gone = False

    def cancel(self, generation: int) -> None:
        """Generation `generation` must start no worker if it has not started them yet (the run is stopping)."""
        with self._lock:
            self._cancelled.add(generation)

    def cancelled(self, generation: int) -> bool:
        with self._lock:
            return generation in self._cancelled

    def stop_received(self, signum: int, reason: str) -> None:
        """This node's pai-launch is stopping the job (the first stop is the one that counts): it signals its own
        workers, so the agent must not signal them a second time."""
        with self._lock:
            if self._stop is None:
                self._stop = (signum, reason)

    @property
    def stopping(self) -> tuple[int, str] | None:
        with self._lock:
            return self._stop

    def on_abandon(self, signum, frame) -> None:
        """The abandon signal's handler (installed by agent.main)."""
        if self.in_torch.is_set():
            raise Abandoned()
