"""The narrow boundary between the supervisor and the agent process: a generation request in, a result out.

Both sides exchange one JSON object per line over pipes. This module imports nothing heavy, so the
supervisor can use it without torch and the agent without typer or watchdog.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class GenerationRequest:
    """Start `nproc` workers running `python ARGS` under a fresh elastic rendezvous."""

    generation: int
    nproc: int
    python: str
    args: tuple[str, ...]
    env: dict[str, str]
    log_dir: str
    grace: float
    elastic_run_id: str

    def to_line(self) -> bytes:
        return (json.dumps(asdict(self)) + "\n").encode()

    @classmethod
    def from_line(cls, line: bytes) -> GenerationRequest:
        data = json.loads(line)
        data["args"] = tuple(data["args"])
        return cls(**data)


@dataclass(frozen=True)
class WorkerFailure:
    """One rank that did not exit 0: `returncode` is Popen-style (negative N for signal N)."""

    rank: int
    returncode: int
    pid: int
    log_tail: str = ""


@dataclass(frozen=True)
class GenerationResult:
    """How a generation ended: no failures means every worker exited 0."""

    generation: int
    failures: tuple[WorkerFailure, ...] = ()
    error: str | None = None
    log_dir: str = ""

    def to_line(self) -> bytes:
        return (json.dumps(asdict(self)) + "\n").encode()

    @classmethod
    def from_line(cls, line: bytes) -> GenerationResult:
        data = json.loads(line)
        data["failures"] = tuple(WorkerFailure(**item) for item in data["failures"])
        return cls(**data)
