"""Tier-2 fixtures: run the real `pai-launch` (real elastic agent, real worker processes) on tests/fake_trainer.py.

Layout under tmp_path:
    work/      pai-launch's working directory (save folders land here; nothing else is put here)
    io/        pai-launch's stdout/stderr files, the trainer's ready files, records and signal log
    tmp/       TMPDIR for pai-launch (its temporary log folder must be gone when it exits)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    FAKE_TRAINER,
    Launch,
    launch_env,
    read_ready_dir,
    read_signal_log,
    start_pai_launch,
    wait_until,
)

#: Generous for one generation on a loaded 2-core machine (usually 1-2 s).
GENERATION_TIMEOUT = 45


@dataclass
class Scene:
    root: Path
    work: Path = field(init=False)
    io: Path = field(init=False)
    ready_dir: Path = field(init=False)
    record_dir: Path = field(init=False)
    signal_log: Path = field(init=False)
    hold_file: Path = field(init=False)
    launches: list[Launch] = field(default_factory=list)
    #: Environment every launch of this scene gets (a test's own `env` wins), e.g. PAI_LAUNCH_COLD=1.
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.work = self.root / "work"
        self.io = self.root / "io"
        self.ready_dir = self.io / "ready"
        self.record_dir = self.io / "records"
        self.signal_log = self.io / "signals.log"
        self.hold_file = self.io / "release"
        for folder in (self.work, self.io, self.ready_dir, self.record_dir):
            folder.mkdir(parents=True, exist_ok=True)

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def instrumentation(self) -> list[str]:
        """Trainer options that report what happened: records of argv/env, ready files, a signal log."""
        return ["--record", str(self.record_dir), "--ready-dir", str(self.ready_dir), "--signal-log",
                str(self.signal_log)]

    def start(self, *pai_args: str, script_args: tuple[str, ...] | list[str] = (), script: Path | str = FAKE_TRAINER,
              instrument: bool = True, json_logs: bool = True, env: dict[str, str] | None = None,
              new_session: bool = False, prefix: tuple[str, ...] | list[str] = (), name: str | None = None,
              entry: tuple[str, ...] = ("-m", "pai_launch")) -> Launch:
        """Start `[PREFIX...] pai-launch [--log-format json] PAI_ARGS SCRIPT [instrumentation] SCRIPT_ARGS` in work/,
        its output in io/NAME.stdout and .stderr (default NAME: launchN)."""
        args = [*(["--log-format", "json"] if json_logs else []), *pai_args, str(script),
                *(self.instrumentation if instrument else []), *script_args]
        launch = start_pai_launch(args, cwd=self.work, io_dir=self.io,
                                  env=launch_env(self.root, {**self.extra_env, **(env or {})}),
                                  name=name or f"launch{len(self.launches)}", new_session=new_session, prefix=prefix,
                                  entry=entry)
        self.launches.append(launch)
        return launch

    def run(self, *pai_args: str, timeout: float = 60, **kwargs) -> tuple[Launch, int]:
        launch = self.start(*pai_args, **kwargs)
        return launch, launch.wait(timeout)

    # --- what the trainer reported -----------------------------------------------------------------
    def ready(self, generation: int) -> dict[int, tuple[int, int | None]]:
        """rank -> (pid, grandchild pid or None) for the trainer processes of `generation` that are running."""
        return read_ready_dir(self.ready_dir, generation)

    def wait_ready(self, generation: int, count: int,
                   timeout: float = GENERATION_TIMEOUT) -> dict[int, tuple[int, int | None]]:
        return wait_until(lambda: (lambda r: r if len(r) >= count else None)(self.ready(generation)), timeout,
                          message=f"{count} trainer process(es) of generation {generation} to be ready")

    def records(self) -> list[dict[str, Any]]:
        """One record per trainer process started (init run included), sorted by generation then rank."""
        found = [json.loads(path.read_text()) for path in self.record_dir.glob("*.json")]
        return sorted(found, key=lambda r: (int(r["env"]["PAI_LAUNCH_GENERATION"] or 0), int(r["env"]["RANK"] or 0)))

    def signals(self) -> dict[int, list[str]]:
        """rank -> signal names it received, in order."""
        return read_signal_log(self.signal_log)

    def work_listing(self) -> list[str]:
        return sorted(str(path.relative_to(self.work)) for path in self.work.rglob("*"))

    def tmp_listing(self) -> list[str]:
        return sorted(os.listdir(self.tmp)) if self.tmp.exists() else []


@pytest.fixture
def scene(tmp_path: Path):
    scene = Scene(tmp_path)
    yield scene
    for launch in scene.launches:  # a failed test may leave one running; the no_orphans check follows
        launch.kill()


@pytest.fixture(params=["warm", "cold"])
def both_modes(request, scene):
    """Run the test twice: warm workers (the default) and --cold (through PAI_LAUNCH_COLD, so every node gets it)."""
    if request.param == "cold":
        scene.extra_env["PAI_LAUNCH_COLD"] = "1"
    yield request.param
    # Each launch whose agent came up ran the mode asked for.
    for launch in scene.launches:
        for ready in launch.events("agent_ready"):
            assert ready["workers"] == request.param, (str(launch.stderr_path), ready)


@pytest.fixture
def make_scene():
    """Scenes rooted elsewhere than tmp_path (e.g. a folder another user may enter); launches killed at the end."""
    made: list[Scene] = []

    def make(root: Path) -> Scene:
        made.append(Scene(root))
        return made[-1]

    yield make
    for scene in made:
        for launch in scene.launches:
            launch.kill()

