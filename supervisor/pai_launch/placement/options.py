"""The launch options checked among themselves, before the machine is looked at (cli.preflight): pure, so every
rule is a test of values. A problem is one line naming the option and the fix (PreflightError, exit 2)."""

from __future__ import annotations

import posixpath

from pai_launch.placement import pathnames, seconds
from pai_launch.placement.spec import (
    LOG_FORMATS,
    MODULE,
    PROGRAM,
    RESERVED_SCRIPT_FLAGS,
    RESTRUCTURE_MODES,
    RESUME_STAGES,
    LaunchSpec,
    PreflightError,
)


def check(spec: LaunchSpec, *, chosen_nproc: int | None) -> None:
    """Raise PreflightError for the first option that is out of range or contradicts another. `chosen_nproc` is the
    worker count asked for (--nproc, or the GPUs Slurm gave this node); None: left to the visible GPUs."""
    _check_seconds(spec)
    _check_paths(spec)
    for arg in spec.script_args:
        name = arg.split("=", 1)[0]
        if name in RESERVED_SCRIPT_FLAGS:
            raise PreflightError(f"remove {name} from the script's arguments: pai-launch adds it itself when needed")
    if spec.nproc < 1:
        raise PreflightError(f"--nproc {spec.nproc} is less than 1: give the number of worker processes, e.g. --nproc "
                             "2")
    if spec.data_parallel and chosen_nproc not in (None, 1):
        raise PreflightError("--nproc has no effect with --data-parallel (one process uses every GPU): drop --nproc")
    for flag, limit in (("--max-dendrites", spec.max_dendrites), ("--max-generations", spec.max_generations)):
        if limit is not None and limit < 1:
            raise PreflightError(f"{flag} {limit} is less than 1: give a whole number of 1 or more, or leave it out "
                                 "for no limit")
    if spec.max_failures < 1:
        raise PreflightError(f"--max-failures {spec.max_failures} is less than 1: give how many failed generations to "
                             "allow, e.g. 3")
    if spec.backoff_max < spec.backoff:
        raise PreflightError(f"--backoff {spec.backoff:g} / --backoff-max {spec.backoff_max:g}: give 0 <= --backoff <= "
                             "--backoff-max")
    if spec.nodes.multi:
        if spec.data_parallel:
            raise PreflightError("--data-parallel runs one process on one machine: drop it or drop --nnodes")
        if spec.fresh and not spec.nodes.coordinator:
            raise PreflightError("--fresh is node 0's to give (it moves the shared save folder aside): drop it on this "
                                 "node")
    if spec.preload is not None:
        if spec.runs_as == PROGRAM:
            raise PreflightError("--preload has no effect with --no-python (a program that is not Python starts "
                                 "cold): drop one of them")
        if spec.cold:
            raise PreflightError("--preload has no effect with --cold (no forkserver): drop one of them")
        for name in spec.preload:
            if not all(part.isidentifier() for part in name.split(".")) or name.startswith("__"):
                raise PreflightError(f"--preload {name!r} is not a module name: give importable names, e.g. "
                                     "torch,numpy")
    if spec.restructure not in RESTRUCTURE_MODES:
        raise PreflightError(f"--restructure {spec.restructure!r} is unknown: use restart (workers exit and are "
                             "started again) or in-process (the script calls training.after_restructure)")
    if spec.resume_from is not None and spec.resume_from not in RESUME_STAGES:
        raise PreflightError(f"--resume-from {spec.resume_from!r} is unknown: use switch (SAVE/switch_N.pt) or latest "
                             "(SAVE/latest.pt), whichever the script loads")
    if spec.metrics_port is not None and not 0 <= spec.metrics_port <= 65535:
        raise PreflightError(f"--metrics-port {spec.metrics_port} is not a TCP port: give 1-65535 (0: any free port)")
    if spec.log_format not in LOG_FORMATS:
        raise PreflightError(f"--log-format {spec.log_format!r} is unknown: use one of {', '.join(LOG_FORMATS)}")
    _check_save_name(spec)


def _check_seconds(spec: LaunchSpec) -> None:
    """Every option in seconds is finite and in its range (seconds.RANGES)."""
    given = {"--grace": spec.grace, "--backoff": spec.backoff, "--backoff-max": spec.backoff_max,
             "--stall-timeout": spec.stall_timeout, "--rdzv-timeout": spec.nodes.rdzv_timeout,
             "--fs-settle": spec.fs_settle}
    for option, value in given.items():
        found = None if value is None else seconds.problem(option, value)
        if found:
            raise PreflightError(found)


def _check_save_name(spec: LaunchSpec) -> None:
    """The save folder is a folder of its own: never the working directory or one above it (--fresh would move the
    script and everything beside it aside), and its name prints on one line."""
    name = spec.save_name
    if any(ord(char) < 32 or ord(char) == 127 for char in name):
        raise PreflightError(f"--save-name {name!r} holds a control character: give a plain folder name, e.g. "
                             "--save-name PAI")
    folder = posixpath.normpath(spec.workdir / name)
    workdir = posixpath.normpath(spec.workdir)
    if not name or folder == workdir or workdir.startswith(folder.rstrip("/") + "/"):
        raise PreflightError(f"--save-name {name!r} is the working directory {workdir} or a folder above it: give a "
                             "folder of its own, e.g. --save-name PAI")


def _check_paths(spec: LaunchSpec) -> None:
    """Every path given fits the file system's limits (a name too long fails every system call on it)."""
    given = [("--save-name", spec.save_name), ("--log-dir", spec.log_dir)]
    if spec.runs_as != MODULE:
        given.append(("the script", spec.script_text or spec.script))
    for what, path in given:
        problem = pathnames.problem(what, path) if path is not None else None
        if problem:
            raise PreflightError(problem)
