"""The launch specification built from what the user typed and where pai-launch runs.

Every default that depends on another value (the worker count on the visible GPUs, the settle time on the file
system, what Slurm fills in) is resolved here, once, so the spec holds decisions rather than "was it given" flags
and the command line only declares its options.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path

from pai_launch.cli import declared
from pai_launch.cli.preflight import default_nproc, parse_gpu_list, physical_gpu_count, visible_gpus
from pai_launch.linux import capacity
from pai_launch.placement import joboptions, rankoutput, slurm
from pai_launch.placement.spec import (
    DEFAULT_MAX_FAILURES,
    DEFAULT_SAVE_NAME,
    MODULE,
    PROGRAM,
    SCRIPT,
    LaunchSpec,
    PreflightError,
    default_fs_settle,
)
from pai_launch.wire import lineprefix, log_events


def _of(cls, parameters: Mapping[str, object]) -> CommandLine:
    """The options among a command's parameters; the others (typer's context, --version) are left out."""
    return cls(**{option.name: parameters[option.name] for option in declared.TYPED})


#: The launch options as typer parsed them (from the command line or PAI_LAUNCH_<NAME>); None: not given. A field for
#: each option cli.declared declares, named as the launch command's parameter for it.
CommandLine = make_dataclass("CommandLine", [(option.name, option.kind) for option in declared.TYPED], frozen=True,
                             namespace={"of": classmethod(_of)})


@dataclass(frozen=True)
class Host:
    """What the spec takes from the process pai-launch runs as and its machine, never from the options."""

    env: dict[str, str]
    #: GPUs the NVIDIA driver reports (0: no driver).
    physical_gpus: int
    workdir: Path
    python: str
    #: The CPUs this process may run on (its affinity mask), as torchrun counts them for --nproc-per-node cpu.
    cpus: int = 1
    hostname: str = ""

    @classmethod
    def here(cls) -> Host:
        return cls(dict(os.environ), physical_gpu_count(), Path.cwd(), sys.executable, capacity.usable_cores(),
                   socket.gethostname())


@dataclass(frozen=True)
class Built:
    spec: LaunchSpec
    #: The GPUs the run may use: --gpus, else CUDA_VISIBLE_DEVICES, else every GPU the driver reports.
    visible: tuple[str, ...]
    #: The worker count asked for (--nproc, or the GPUs Slurm or the platform gave this node); None: left to the visible
    #: GPUs.
    chosen_nproc: int | None
    #: --dry-run's line naming the values taken from Slurm; None: none were.
    from_slurm: str | None
    #: Where the run sits among machines, and the Slurm job and values it was read from (pai-launch env shows them).
    place: joboptions.Place
    #: --dry-run's line naming the platform detected and the values taken from it; None: none was.
    from_platform: str | None = None
    #: Warnings the run starts with, as (event, fields).
    notes: list[tuple[str, dict]] = field(default_factory=list)


def resolve_nproc(given: int | str | None, visible: tuple[str, ...], cpus: int) -> int | None:
    """--nproc's number: a word counted on this machine as torchrun counts it (gpu needs a visible GPU)."""
    if given == "gpu" and not visible:
        raise PreflightError("--nproc gpu: no GPU is visible (CUDA_VISIBLE_DEVICES, --gpus or the NVIDIA driver): "
                             "give the number of workers, or auto or cpu")
    if given in ("gpu", "auto"):
        return len(visible) or cpus
    if given == "cpu":
        return cpus
    return given


def build(typed: CommandLine, host: Host) -> Built:
    """PreflightError, NodesError or SlurmError name the first value that cannot be resolved; the options are
    checked against each other and the machine afterwards (cli.preflight)."""
    gpus = None if typed.gpus is None else parse_gpu_list(typed.gpus)
    visible = visible_gpus(host.env, gpus, host.physical_gpus)
    place = joboptions.resolve(_place_options(typed, host, resolve_nproc(typed.nproc, visible, host.cpus)), host.env,
                               visible)
    spec = _spec(typed, host, gpus, place, default_nproc(visible) if place.nproc is None else place.nproc)
    notes = [COLD_PROGRAM] if spec.runs_as == PROGRAM and not typed.cold else []
    from_platform = None if place.platform is None else place.platform.taken(place.from_platform)
    return Built(spec, visible, place.nproc, _from_slurm(place), place, from_platform, notes)


#: A program that is not Python cannot be a fork of the agent's preloaded interpreter.
COLD_PROGRAM = (log_events.TORCHRUN_FLAG_MAPPED, {
    "flag": "--no-python", "value": "1", "as_option": "--cold",
    "why": "a program that is not Python cannot be forked from the agent's preloaded interpreter: its workers start "
    "cold"})


def runs_as(typed: CommandLine) -> str:
    if typed.module and typed.no_python:
        raise PreflightError("-m/--module and --no-python cannot be used together (a module is run by python): drop "
                             "one")
    return MODULE if typed.module else PROGRAM if typed.no_python else SCRIPT


def _spec(typed: CommandLine, host: Host, gpus: tuple[str, ...] | None, place: joboptions.Place,
          nproc: int) -> LaunchSpec:
    allocation = place.allocation
    return LaunchSpec(
        **as_typed(typed),
        script=Path(typed.script),
        script_text=typed.script,
        workdir=host.workdir,
        python=host.python,
        runs_as=runs_as(typed),
        nproc=nproc,
        save_name=DEFAULT_SAVE_NAME if typed.save_name is None else typed.save_name,
        adopt_save_folder=typed.save_name is None,
        gpus=gpus,
        log_dir=None if typed.log_dir is None else (host.workdir / typed.log_dir).resolve(),
        muted=_muted(typed, nproc),
        line_prefix_template=_line_prefix_template(typed, host.env),
        max_failures=DEFAULT_MAX_FAILURES if typed.max_failures is None else typed.max_failures,
        retries_requested=typed.max_failures is not None,
        nodes=place.nodes,
        fs_settle=default_fs_settle(place.nodes, typed.poll) if typed.fs_settle is None else typed.fs_settle,
        requeue_on=place.requeue_on,
        slurm_job_id=allocation.job_id if allocation else None,
        slurm_restart_count=allocation.restart_count if allocation else 0,
        slurm_step=allocation is not None and bool(host.env.get("SLURM_STEP_ID")),
        cold=typed.cold or typed.no_python,
    )


def as_typed(typed: CommandLine) -> dict[str, object]:
    """The spec fields options fill as typed (or through their declared converter), by their declarations."""
    return {option.fills: option.spec_value(getattr(typed, option.name)) for option in declared.TYPED
            if option.fills != declared.RESOLVED}


def _place_options(typed: CommandLine, host: Host, nproc: int | None) -> joboptions.PlaceOptions:
    return joboptions.PlaceOptions(typed.nnodes, typed.node_rank, typed.rdzv_endpoint, typed.rdzv_id,
                                   typed.rdzv_timeout, typed.local_addr, typed.use_slurm, typed.requeue_on, nproc,
                                   typed.rdzv_backend, host.hostname)


def _muted(typed: CommandLine, nproc: int) -> tuple[tuple[int, str], ...]:
    """The ranks' streams kept off the console (placement.rankoutput); a stream redirected needs a folder to keep it."""
    muted = rankoutput.muted(nproc, typed.redirects, typed.tee, typed.local_ranks_filter)
    if rankoutput.redirects_any(typed.redirects) and typed.log_dir is None:
        raise PreflightError(f"--redirects {typed.redirects} keeps output off the console, in files that last only as "
                             f"long as the run without --log-dir: give --log-dir DIR to keep them")
    if muted and typed.data_parallel:
        raise PreflightError("--redirects and --local-ranks-filter have no effect with --data-parallel (one process, "
                             "no ranks): drop them")
    return muted


#: torch's own variable for the template: below the option (from the command line, PAI_LAUNCH_* or PET_*), as in torch.
TORCHELASTIC_TEMPLATE = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"


def _line_prefix_template(typed: CommandLine, env: Mapping[str, str]) -> str | None:
    """What starts each relayed line: --log-line-prefix-template, else torch's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE
    (empty: pai-launch's `[rankN]: `); a template that cannot be rendered is refused here, naming where it came from,
    so that nothing starts rather than every line carrying it."""
    given = typed.log_line_prefix_template
    if given and typed.data_parallel:
        raise PreflightError("--log-line-prefix-template has no effect with --data-parallel (one process, no ranks): "
                             "drop it")
    name, template = ("--log-line-prefix-template", given) if given else (TORCHELASTIC_TEMPLATE,
                                                                          env.get(TORCHELASTIC_TEMPLATE))
    if not template or typed.data_parallel:
        return None
    why = lineprefix.problem(template)
    if why is not None:
        raise PreflightError(f"{name} {template!r}: {why}")
    return template


def _from_slurm(place: joboptions.Place) -> str | None:
    if place.allocation is None or not place.from_slurm:
        return None
    return f"from Slurm (job {place.allocation.job_id}): " + "; ".join(slurm.taken(place.allocation, place.from_slurm))
