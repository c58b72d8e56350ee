"""The facts `pai-launch env` reports, gathered: this machine (envreport.hostfacts), the run's interpreter (its probe,
in a child), and what a launch started here would make of them.

The launch's view goes through the launch's own code: its options are parsed by the launch command's declarations
(PAI_LAUNCH_* included), the GPUs counted by the preflight's functions, and the placement and defaults resolved by
cli.specbuilder; so the report cannot disagree with what a launch would do. Each part is a seam a test replaces.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass

import typer

try:  # recent typer carries its own copy of click
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer on top of click
    from click.exceptions import ClickException

from pai_launch import __version__
from pai_launch.cli import launch, specbuilder
from pai_launch.cli.preflight import visible_gpus
from pai_launch.envreport import hostfacts, interpreter
from pai_launch.placement import options, slurm
from pai_launch.wire.errors import LaunchError

#: Bumped when a key is removed or changes meaning (new keys may appear at any time).
JSON_FORMAT = 1
#: The SCRIPT a launch's command line needs; the report is about everything but the script.
SCRIPT = "SCRIPT"


def command_line() -> specbuilder.CommandLine:
    """The launch command's options as a launch here would parse them: its declared defaults, and PAI_LAUNCH_<NAME>
    from this process's environment (click reads os.environ itself). ClickException for a value it refuses."""
    context = typer.main.get_command(launch.app).make_context("pai-launch", [SCRIPT])
    return specbuilder.CommandLine.of(context.params)


@dataclass(frozen=True)
class Readers:
    """Where each part of the report comes from; the defaults read this process and machine."""

    where: Callable[[], specbuilder.Host] = specbuilder.Host.here
    probe: Callable[[str, float], dict] = interpreter.probe
    system: Callable[[], dict] = hostfacts.system
    cpu: Callable[[], dict] = hostfacts.cpu
    open_files: Callable[[], dict] = hostfacts.open_files
    gpu_driver: Callable[[], str | None] = hostfacts.gpu_driver
    command_line: Callable[[], specbuilder.CommandLine] = command_line


def gather(python: str, timeout: float, readers: Readers = Readers()) -> dict:
    """Every fact, as the stable dict `--json` prints (docs/users/env.md: "Bug reports: pai-launch env")."""
    here = readers.where()
    probed = readers.probe(python, timeout)
    facts = probed.pop("facts") or {}
    return {
        "format": JSON_FORMAT,
        "pai_launch": {"version": __version__, "python": here.python},
        "python": facts.get("python"),
        "system": readers.system(),
        "probe": probed,
        "packages": facts.get("packages"),
        "torch": facts.get("torch"),
        "torch_error": facts.get("torch_error"),
        "gpus": gpus(here, readers.gpu_driver()),
        "cpu": readers.cpu(),
        "open_files": readers.open_files(),
        **launch_view(here, readers.command_line),
        "environment": hostfacts.variables(here.env, slurm.READ_VARIABLES),
    }


def gpus(here: specbuilder.Host, driver: str | None) -> dict:
    """The GPUs as a launch's preflight counts them: the driver's, and those CUDA_VISIBLE_DEVICES leaves visible."""
    return {"cuda_visible_devices": here.env.get("CUDA_VISIBLE_DEVICES"), "driver_count": here.physical_gpus,
            "driver_version": driver, "visible": list(visible_gpus(here.env, None, here.physical_gpus))}


def launch_view(here: specbuilder.Host, parse: Callable[[], specbuilder.CommandLine]) -> dict:
    """{"placement": ..., "options": ...}: where a launch here would run and with what; a value a launch would refuse
    is its one-line error, as `problem`."""
    try:
        typed = parse()
    except ClickException as exc:
        return _refused(here, exc.format_message())
    try:
        built = specbuilder.build(typed, here)
        options.check(built.spec, chosen_nproc=built.chosen_nproc)
    except LaunchError as exc:
        return _refused(here, str(exc))
    return {"placement": placement(built), "options": effective_options(typed, built, here)}


def _refused(here: specbuilder.Host, problem: str) -> dict:
    return {"placement": {**_slurm_only(here.env), "problem": problem}, "options": None}


def _slurm_only(env: dict[str, str]) -> dict:
    """What can be said of the Slurm job when the launch's view cannot be built."""
    try:
        allocation = slurm.from_env(env)
    except LaunchError:  # the job's variables are what the launch refused: the problem says so
        allocation = None
    return {"slurm": bool(env.get("SLURM_JOB_ID")), "slurm_job": _job(allocation), "taken": [], "nnodes": None,
            "node_rank": None, "rendezvous": None, "rdzv_id": None}


def placement(built: specbuilder.Built) -> dict:
    nodes, place = built.spec.nodes, built.place
    count = str(nodes.max_nodes) if nodes.min_nodes == nodes.max_nodes else f"{nodes.min_nodes}:{nodes.max_nodes}"
    taken = slurm.taken(place.allocation, place.from_slurm) if place.allocation and place.from_slurm else []
    return {"slurm": place.allocation is not None, "slurm_job": _job(place.allocation), "taken": taken,
            "nnodes": count, "node_rank": nodes.node_rank, "rendezvous": nodes.endpoint if nodes.multi else None,
            "rdzv_id": nodes.rdzv_id, "problem": None}


def _job(allocation: slurm.SlurmAllocation | None) -> dict | None:
    if allocation is None:
        return None
    return {"job_id": allocation.job_id, "nnodes": allocation.nnodes, "node_rank": allocation.node_rank,
            "hosts": list(allocation.hosts), "gpus_on_node": allocation.gpus_on_node,
            "restart_count": allocation.restart_count}


def effective_options(typed: specbuilder.CommandLine, built: specbuilder.Built, here: specbuilder.Host) -> dict:
    """The values a launch here would run with where the command line gives nothing more."""
    spec = built.spec
    return {
        "nproc": spec.nproc, "nproc_from": _nproc_from(typed, built),
        "save_name": spec.save_name, "save_folder": str(here.workdir / spec.save_name),
        "gpus": None if spec.gpus is None else list(spec.gpus), "grace": spec.grace,
        "max_failures": spec.max_failures, "backoff": spec.backoff, "backoff_max": spec.backoff_max,
        "stall_timeout": spec.stall_timeout, "fs_settle": spec.fs_settle, "rdzv_timeout": spec.nodes.rdzv_timeout,
        "log_format": spec.log_format, "log_dir": None if spec.log_dir is None else str(spec.log_dir),
        "poll": spec.poll, "cold": spec.cold, "preload": None if spec.preload is None else list(spec.preload),
        "resume_from": spec.resume_from, "doctor": spec.doctor, "metrics_port": spec.metrics_port,
        "requeue_on": None if spec.requeue_on is None else signal.Signals(spec.requeue_on).name,
        "data_parallel": spec.data_parallel,
    }


def _nproc_from(typed: specbuilder.CommandLine, built: specbuilder.Built) -> str:
    """Where the worker count comes from, in a launch's order: --nproc (here: PAI_LAUNCH_NPROC), Slurm's GPUs on this
    node, the visible GPUs, else 1."""
    if typed.nproc is not None:
        return "PAI_LAUNCH_NPROC"
    if "nproc" in built.place.from_slurm:
        return "SLURM_GPUS_ON_NODE"
    if built.visible:
        return "the visible GPUs"
    return "no GPU visible"
