"""The command line: parse options into a LaunchSpec, preflight it, then hand over to the runner.

Everything after SCRIPT belongs to the script, as with torchrun. This is also the outer exit-code
boundary: usage errors are one line and exit 2, and a bug anywhere is exit 70 (INTERNAL_ERROR)
with every process we started stopped, never a bare traceback.
"""

from __future__ import annotations

import os
import queue
import sys
import traceback
from pathlib import Path
from typing import Annotated, Optional

import typer

try:  # recent typer carries its own copy of click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer on top of click
    from click.exceptions import UsageError

from pai_launch import __version__
from pai_launch.core import exitcodes
from pai_launch.core import joboptions
from pai_launch.core import nodes
from pai_launch.linux import procs
from pai_launch.core import slurm
from pai_launch.cli.preflight import default_nproc, parse_gpu_list, physical_gpu_count, preflight, visible_gpus
from pai_launch.core.spec import LaunchSpec
from pai_launch.wire.errors import LaunchError

EPILOG = (
    "Example: pai-launch --nproc 8 train.py --epochs 100\n\n"
    "Exit codes: "
    + "; ".join(f"{code} {meaning}" for code, meaning in exitcodes.TABLE)
    + ".\n\nEvery option but --fresh may also be set as PAI_LAUNCH_<NAME> in the environment (e.g. PAI_LAUNCH_NPROC=8); "
    "the command line wins.\n\nEvery process gets PAI_LAUNCH_RUN_ID (one id for the whole run) and PAI_LAUNCH_GENERATION "
    "(0 for the init run, then 1, 2, ...).\n\n"
    "Tools: pai-launch doctor SCRIPT [--json] checks a script against the PerforatedAI DDP protocol; "
    "pai-launch status [SAVE] [--json] [--watch] [--timeline FILE.png] shows where a run stands. "
    "(A script named doctor or status runs as ./doctor or ./status.)"
)

app = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"], "allow_interspersed_args": False},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"pai-launch {__version__}")
        raise typer.Exit(0)


#: Every option but --fresh can also come from PAI_LAUNCH_<NAME> (a unit's Environment=, a container's -e); the
#: command line wins. --fresh stays on the command line: from the environment it would move the save folder aside
#: at every restart of a service, throwing away the resume it exists for.
ENV_PREFIX = "PAI_LAUNCH_"


def _option(*names: str, env: str | None, help: str, **kwargs) -> typer.models.OptionInfo:
    return typer.Option(*names, help=help, envvar=None if env is None else ENV_PREFIX + env, **kwargs)


@app.command(epilog=EPILOG)
def launch(
    ctx: typer.Context,
    script: Annotated[Path, typer.Argument(help="The training script (run with `python -u`).", show_default=False)],
    script_args: Annotated[
        Optional[list[str]], typer.Argument(help="Arguments for the script; everything after SCRIPT goes to it.", show_default=False)
    ] = None,
    nproc: Annotated[Optional[int], _option(
        "--nproc", "--nproc-per-node", env="NPROC", show_default=False,
        help="Worker processes on this machine. Default: the visible GPUs, else 1.")] = None,
    save_name: Annotated[Optional[str], _option(
        "--save-name", env="SAVE_NAME", show_default=False,
        help="The save_name the script passes to UPA.perforate_model, relative to the working directory. [default: PAI]")] = None,
    gpus: Annotated[Optional[str], _option(
        "--gpus", env="GPUS", show_default=False,
        help="GPUs to use, e.g. 0,1,2 (sets CUDA_VISIBLE_DEVICES; the init run gets the first).")] = None,
    grace: Annotated[float, _option("--grace", env="GRACE", help="Seconds stopping processes may take before they are killed.")] = 30.0,
    log_format: Annotated[str, _option("--log-format", env="LOG_FORMAT",
                                       help="auto (console on a terminal, else JSON), console or json.")] = "auto",
    log_dir: Annotated[Optional[Path], _option(
        "--log-dir", env="LOG_DIR", show_default=False,
        help="Keep every rank's stdout/stderr of every generation in files under DIR.")] = None,
    poll: Annotated[bool, _option("--poll", env="POLL", help="Watch the save folder by polling (network file systems).")] = False,
    reinit: Annotated[bool, _option("--reinit", env="REINIT",
                                    help="Run the init run even when the save folder already holds its outputs.")] = False,
    data_parallel: Annotated[bool, _option(
        "--data-parallel", env="DATA_PARALLEL",
        help="DataParallel workflow: init run, then one plain process with every GPU; no restarts.")] = False,
    dry_run: Annotated[bool, _option("--dry-run", env="DRY_RUN",
                                     help="Print the plan (commands, environment, directory) and start nothing.")] = False,
    max_failures: Annotated[Optional[int], _option(
        "--max-failures", env="MAX_FAILURES", show_default=False,
        help="Consecutive failed generations without a new switch file before giving up (exit 4). With --data-parallel, "
             "giving it allows retries (from the start). [default: 3]")] = None,
    backoff: Annotated[float, _option("--backoff", env="BACKOFF",
                                      help="Seconds before the first retry of a failed generation; doubles each time.")] = 1.0,
    backoff_max: Annotated[float, _option("--backoff-max", env="BACKOFF_MAX", help="Longest wait between retries, in seconds.")] = 60.0,
    stall_timeout: Annotated[Optional[float], _option(
        "--stall-timeout", env="STALL_TIMEOUT", show_default=False,
        help="Treat a generation as hung after this many seconds without any write to the save folder: SIGUSR1, then "
             "stop and retry. Default: off.")] = None,
    nnodes: Annotated[Optional[str], _option(
        "--nnodes", env="NNODES", show_default=False,
        help="Machines in the job: N, or MIN:MAX to go on with fewer when one is lost. [default: 1, or Slurm's]")] = None,
    node_rank: Annotated[Optional[int], _option(
        "--node-rank", env="NODE_RANK", show_default=False,
        help="This machine's place, 0..N-1. Node 0 runs the init run and serves the rendezvous store at "
             "--rdzv-endpoint. [default: 0, or SLURM_NODEID]")] = None,
    rdzv_endpoint: Annotated[Optional[str], _option(
        "--rdzv-endpoint", env="RDZV_ENDPOINT", show_default=False,
        help="HOST[:PORT] of node 0, the same on every node (port default 29400). Needed with --nnodes above 1. "
             "In Slurm: the first host of the job's node list, port 29400 + job id % 1000.")] = None,
    rdzv_id: Annotated[Optional[str], _option(
        "--rdzv-id", env="RDZV_ID", show_default=False,
        help="The job's rendezvous id (each generation rendezvouses as ID-gN). Default: slurm-JOBID in Slurm, "
             "else node 0's run id.")] = None,
    rdzv_timeout: Annotated[float, _option(
        "--rdzv-timeout", env="RDZV_TIMEOUT",
        help="Seconds to wait for node 0's store and for every node to join a generation.")] = nodes.DEFAULT_RDZV_TIMEOUT,
    local_addr: Annotated[Optional[str], _option(
        "--local-addr", env="LOCAL_ADDR", show_default=False,
        help="The address other machines reach this one's workers at (default: torch's choice from the host name).")] = None,
    fs_settle: Annotated[Optional[float], _option(
        "--fs-settle", env="FS_SETTLE", show_default=False,
        help="Seconds a shared file system may take to show a file another machine wrote, before a generation counts "
             "as having made no progress. Default: 30 with --nnodes above 1 or --poll, else 0.")] = None,
    use_slurm: Annotated[Optional[bool], _option(
        "--slurm/--no-slurm", env="SLURM", show_default=False,
        help="Take the node count, node rank, rendezvous host, job id and GPUs from the Slurm job pai-launch runs in "
             "(explicit options win). Default: when SLURM_JOB_ID is set.")] = None,
    requeue_on: Annotated[Optional[str], _option(
        "--requeue-on", env="REQUEUE_ON", show_default=False,
        help="In Slurm: on this signal (e.g. USR1 from sbatch --signal=B:USR1@120) forward it to the workers, stop the "
             "job cleanly and requeue it (scontrol requeue); the requeued job resumes from the save folder.")] = None,
    cold: Annotated[bool, _option(
        "--cold", env="COLD",
        help="Start every worker as a fresh interpreter, not as a fork of the agent's preloaded forkserver.")] = False,
    preload: Annotated[Optional[str], _option(
        "--preload", env="PRELOAD", show_default=False,
        help="Modules the forkserver imports once for every warm worker, comma-separated (empty: none). Modules that "
             "touch CUDA are refused by its self-check. [default: torch,torch.distributed,perforatedai.utils_perforatedai]")] = None,
    resume_from: Annotated[Optional[str], _option(
        "--resume-from", env="RESUME_FROM", show_default=False,
        help="What a restart resumes from, as the script loads it: switch (pass --pai_load_folder once SAVE holds a "
             "switch_N.pt) or latest (once SAVE/latest.pt exists, so a crash before the first switch resumes "
             "mid-generation). [default: what doctor reads in the script, else switch]")] = None,
    no_doctor: Annotated[bool, _option(
        "--no-doctor", env="NO_DOCTOR", help="Skip checking the script with pai-launch doctor before the run.")] = False,
    metrics_port: Annotated[Optional[int], _option(
        "--metrics-port", env="METRICS_PORT", show_default=False,
        help="Serve Prometheus metrics on this port (0: any free port, logged). Default: off.")] = None,
    metrics_host: Annotated[str, _option(
        "--metrics-host", env="METRICS_HOST", help="The address --metrics-port listens on (0.0.0.0: every interface).")] = "127.0.0.1",
    fresh: Annotated[bool, _option(
        "--fresh", env=None,
        help="Move an existing save folder aside (renamed with a timestamp) and start over. Command line only.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> int:
    """Run PerforatedAI DistributedDataParallel training to completion: the init run, then one generation of
    workers per dendrite restructure, relaunched with --pai_load_folder until SAVE/.training_complete appears."""
    inbox: queue.SimpleQueue = ctx.obj  # the signal handlers' queue, from run_command_line
    env = dict(os.environ)
    physical = physical_gpu_count()
    try:
        gpu_list = parse_gpu_list(gpus) if gpus is not None else None
        visible = visible_gpus(env, gpu_list, physical)
        place = joboptions.resolve(
            joboptions.PlaceOptions(nnodes, node_rank, rdzv_endpoint, rdzv_id, rdzv_timeout, local_addr, use_slurm,
                                    requeue_on, nproc), env, visible)
        nproc, allocation = place.nproc, place.allocation
        spec = LaunchSpec(
            script=script,
            workdir=Path.cwd(),
            python=sys.executable,
            script_args=tuple(script_args or ()),
            nproc=default_nproc(visible) if nproc is None else nproc,
            save_name=save_name if save_name is not None else "PAI",
            save_name_given=save_name is not None,
            gpus=gpu_list,
            grace=grace,
            log_format=log_format,
            log_dir=None if log_dir is None else log_dir.resolve(),
            poll=poll,
            reinit=reinit,
            data_parallel=data_parallel,
            dry_run=dry_run,
            fresh=fresh,
            max_failures=3 if max_failures is None else max_failures,
            max_failures_given=max_failures is not None,
            backoff=backoff,
            backoff_max=backoff_max,
            stall_timeout=stall_timeout,
            nodes=place.nodes,
            fs_settle_given=fs_settle,
            requeue_on=place.requeue_on,
            slurm_job_id=allocation.job_id if allocation else None,
            slurm_restart_count=allocation.restart_count if allocation else 0,
            slurm_step=allocation is not None and bool(env.get("SLURM_STEP_ID")),
            cold=cold,
            preload=None if preload is None else tuple(name.strip() for name in preload.split(",") if name.strip()),
            resume_from=resume_from,
            doctor=not no_doctor,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
        )
        preflight(spec, nproc_given=nproc is not None, env=env, physical=physical)
    except LaunchError as exc:
        _error(str(exc))
        return exc.exit_code
    if dry_run and place.from_slurm:
        print(f"from Slurm (job {allocation.job_id}): " + "; ".join(slurm.taken(allocation, place.from_slurm)))
    from pai_launch.cli.startup import launch_run

    return launch_run(spec, env, visible, inbox)


def _error(message: str) -> None:
    _say(f"pai-launch: error: {message}\n")


def _say(text: str) -> None:
    """To stderr, if it can take it: a console that is gone must not change the exit code."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - nothing else to tell it with
        pass


def run_command_line(argv: list[str], inbox: queue.SimpleQueue) -> int:
    """Run the typer app without click's own exit handling, so usage errors are one line and exit 2.

    `inbox` (where the signal handlers put what they catch) reaches the command as typer's context object.
    """
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="pai-launch", standalone_mode=False, obj=inbox)
    except UsageError as exc:
        _error(f"{exc.format_message()} (see pai-launch --help)")
        return exitcodes.USAGE
    except typer.Abort:
        return exitcodes.for_signal(2)
    except Exception as exc:  # the outer boundary: a bug outside a run's own loop
        return _internal_error(exc)
    return result if isinstance(result, int) else 0


def _internal_error(exc: Exception) -> int:
    """The traceback for the report, one line saying what it means, and nothing of ours left running; exit 70 even when
    none of it can be written."""
    _say(traceback.format_exc())
    try:
        left = procs.Descendants().kill_all()
    except Exception:  # noqa: BLE001 - the exit code must still say what happened
        left = 0
    _error(f"internal error ({type(exc).__name__}: {exc}): a bug in pai-launch, exit code {exitcodes.INTERNAL_ERROR}"
           + (f"; {left} process(es) it had started were killed" if left else "") + "; please report it with the traceback above")
    return exitcodes.INTERNAL_ERROR
