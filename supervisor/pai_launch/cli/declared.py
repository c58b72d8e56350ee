"""Each launch option's declaration for typer: its flags (torchrun's spellings among them), its PAI_LAUNCH_ variable
and its help. cli.launch names them in its signature; the defaults stay there, beside the command they belong to."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from pai_launch import __version__
from pai_launch.cli import completion, specbuilder


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


#: As text: a Path would drop a program's leading ./ (--no-python ./prog runs that file, prog a program on PATH).
Script = Annotated[str, typer.Argument(
    help="The training script (run with `python -u`); with -m a module, with --no-python a program.",
    show_default=False)]

ScriptArgs = Annotated[
    Optional[list[str]], typer.Argument(help="Arguments for the script; everything after SCRIPT goes to it.", show_default=False)
]

Module = Annotated[bool, _option(
    "-m", "--module", env="MODULE",
    help="SCRIPT is a module: run `python -u -m SCRIPT`, as torchrun -m does.")]

NoPython = Annotated[bool, _option(
    "--no-python", "--no_python", env="NO_PYTHON",
    help="Run SCRIPT itself, without python (an executable on PATH or a path), as torchrun --no-python does; its "
         "workers start cold.")]

Nproc = Annotated[Optional[str], _option(
    "--nproc", "--nproc-per-node", "--nproc_per_node", env="NPROC", show_default=False, parser=specbuilder.parse_nproc,
    help="Worker processes on this machine: N, gpu (the visible GPUs), auto (the visible GPUs, else the CPUs) or "
         "cpu (the CPUs this process may run on). Default: the visible GPUs, else 1.")]

SaveName = Annotated[Optional[str], _option(
    "--save-name", env="SAVE_NAME", show_default=False,
    help="The save_name the script passes to UPA.perforate_model, relative to the working directory. [default: PAI]")]

Gpus = Annotated[Optional[str], _option(
    "--gpus", env="GPUS", show_default=False,
    help="GPUs to use, e.g. 0,1,2 (sets CUDA_VISIBLE_DEVICES; the init run gets the first).")]

Grace = Annotated[float, _option("--grace", env="GRACE", help="Seconds stopping processes may take before they are killed.")]

LogFormat = Annotated[str, _option("--log-format", env="LOG_FORMAT",
                                   help="auto (console on a terminal, else JSON), console or json.")]

LogDir = Annotated[Optional[Path], _option(
    "--log-dir", "--log_dir", env="LOG_DIR", show_default=False,
    help="Keep every rank's stdout/stderr of every generation in files under DIR.")]

Redirects = Annotated[str, _option(
    "-r", "--redirects", env="REDIRECTS",
    help="Keep these streams off the console, in the files --log-dir keeps only, as torchrun does: 0 none, 1 stdout, "
         "2 stderr, 3 both, for every local rank (3) or rank by rank (0:1,1:2). Needs --log-dir.")]

Tee = Annotated[str, _option(
    "-t", "--tee", env="TEE",
    help="Streams shown on the console and kept in files (torchrun's values, as --redirects); every stream is, "
         "unless --redirects keeps it off.")]

LocalRanksFilter = Annotated[str, _option(
    "--local-ranks-filter", "--local_ranks_filter", env="LOCAL_RANKS_FILTER",
    help="Show only these local ranks' output on the console, e.g. 0 or 0,1 (their files keep everything). "
         "Default: every rank.")]

LogLinePrefixTemplate = Annotated[Optional[str], _option(
    "--log-line-prefix-template", "--log_line_prefix_template", env="LOG_LINE_PREFIX_TEMPLATE", show_default=False,
    help="What starts each relayed line of a rank, as torchrun's template: ${rank}, ${local_rank}, ${role_name} and "
         "${hostname} become the worker's, $$ is a literal $ (e.g. '[${hostname}:${rank}] '). "
         "Default: TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, else [rankN]: ([rankN nodeR]: on several machines).")]

Poll = Annotated[bool, _option("--poll", env="POLL", help="Watch the save folder by polling (network file systems).")]

Reinit = Annotated[bool, _option("--reinit", env="REINIT",
                                help="Run the init run even when the save folder already holds its outputs.")]

DataParallel = Annotated[bool, _option(
    "--data-parallel", env="DATA_PARALLEL",
    help="DataParallel workflow: init run, then one plain process with every GPU; no restarts.")]

DryRun = Annotated[bool, _option("--dry-run", env="DRY_RUN",
                                 help="Print the plan (commands, environment, directory) and start nothing.")]

MaxFailures = Annotated[Optional[int], _option(
    "--max-failures", env="MAX_FAILURES", show_default=False,
    help="Consecutive failed generations without a new switch file before giving up (exit 4). With --data-parallel, "
         "giving it allows retries (from the start). [default: 3]")]

MaxDendrites = Annotated[Optional[int], _option(
    "--max-dendrites", env="MAX_DENDRITES", show_default=False,
    help="Stop the run (exit 0) once the model has this many dendrites, complete or not. Default: no limit.")]

MaxGenerations = Annotated[Optional[int], _option(
    "--max-generations", env="MAX_GENERATIONS", show_default=False,
    help="Stop the run (exit 0) after this many generations, complete or not. Default: no limit.")]

Backoff = Annotated[float, _option("--backoff", env="BACKOFF",
                                  help="Seconds before the first retry of a failed generation; doubles each time.")]

BackoffMax = Annotated[float, _option("--backoff-max", env="BACKOFF_MAX", help="Longest wait between retries, in seconds.")]

StallTimeout = Annotated[Optional[float], _option(
    "--stall-timeout", env="STALL_TIMEOUT", show_default=False,
    help="Treat a generation as hung after this many seconds without any write to the save folder: SIGUSR1, then "
         "stop and retry. Default: off.")]

Nnodes = Annotated[Optional[str], _option(
    "--nnodes", env="NNODES", show_default=False,
    help="Machines in the job: N, or MIN:MAX to go on with fewer when one is lost. [default: 1, or Slurm's]")]

NodeRank = Annotated[Optional[int], _option(
    "--node-rank", "--node_rank", env="NODE_RANK", show_default=False,
    help="This machine's place, 0..N-1. Node 0 runs the init run and serves the rendezvous store at "
         "--rdzv-endpoint. [default: 0, or SLURM_NODEID]")]

RdzvBackend = Annotated[Optional[str], _option(
    "--rdzv-backend", env="RDZV_BACKEND", show_default=False,
    help="static or c10d, as torchrun has them: pai-launch's rendezvous is c10d in node 0's store either way; with "
         "c10d a node given no --node-rank finds it from its host name (0 on the rendezvous host, N on a pod "
         "named like it with index N), else is refused. [default: static: no --node-rank is node 0]")]

RdzvEndpoint = Annotated[Optional[str], _option(
    "--rdzv-endpoint", "--rdzv_endpoint", env="RDZV_ENDPOINT", show_default=False,
    help="HOST[:PORT] of node 0, the same on every node (port default 29400). Needed with --nnodes above 1. "
         "In Slurm: the first host of the job's node list, port 29400 + job id % 1000.")]

RdzvId = Annotated[Optional[str], _option(
    "--rdzv-id", "--rdzv_id", env="RDZV_ID", show_default=False,
    help="The job's rendezvous id (each generation rendezvouses as ID-gN). Default: slurm-JOBID in Slurm, "
         "else node 0's run id.")]

RdzvTimeout = Annotated[float, _option(
    "--rdzv-timeout", env="RDZV_TIMEOUT",
    help="Seconds to wait for node 0's store and for every node to join a generation.")]

LocalAddr = Annotated[Optional[str], _option(
    "--local-addr", "--local_addr", env="LOCAL_ADDR", show_default=False,
    help="The address other machines reach this one's workers at (default: torch's choice from the host name).")]

FsSettle = Annotated[Optional[float], _option(
    "--fs-settle", env="FS_SETTLE", show_default=False,
    help="Seconds a shared file system may take to show a file another machine wrote, before a generation counts "
         "as having made no progress. Default: 30 with --nnodes above 1 or --poll, else 0.")]

UseSlurm = Annotated[Optional[bool], _option(
    "--slurm/--no-slurm", env="SLURM", show_default=False,
    help="Take the node count, node rank, rendezvous host, job id and GPUs from the Slurm job pai-launch runs in "
         "(explicit options win). Default: when SLURM_JOB_ID is set.")]

RequeueOn = Annotated[Optional[str], _option(
    "--requeue-on", env="REQUEUE_ON", show_default=False,
    help="In Slurm: on this signal (e.g. USR1 from sbatch --signal=B:USR1@120) forward it to the workers, stop the "
         "job cleanly and requeue it (scontrol requeue); the requeued job resumes from the save folder.")]

Cold = Annotated[bool, _option(
    "--cold", env="COLD",
    help="Start every worker as a fresh interpreter, not as a fork of the agent's preloaded forkserver.")]

Preload = Annotated[Optional[str], _option(
    "--preload", env="PRELOAD", show_default=False,
    help="Modules the forkserver imports once for every warm worker, comma-separated (empty: none). Modules that "
         "touch CUDA are refused by its self-check. [default: torch,torch.distributed,perforatedai.utils_perforatedai]")]

ResumeFrom = Annotated[Optional[str], _option(
    "--resume-from", env="RESUME_FROM", show_default=False,
    help="What a restart resumes from, as the script loads it: switch (pass --pai_load_folder once SAVE holds a "
         "switch_N.pt) or latest (once SAVE/latest.pt exists, so a crash before the first switch resumes "
         "mid-generation). [default: what doctor reads in the script, else switch]")]

Restructure = Annotated[str, _option(
    "--restructure", env="RESTRUCTURE",
    help="What the workers do when PerforatedAI adds dendrites: restart (exit; the next generation resumes from "
         "the switch file) or in-process (the script's training.after_restructure rebuilds DDP around the new model "
         "and trains on in the same processes; see docs/users/training-module.md).")]

NoDoctor = Annotated[bool, _option(
    "--no-doctor", env="NO_DOCTOR", help="Skip checking the script with pai-launch doctor before the run.")]

MetricsPort = Annotated[Optional[int], _option(
    "--metrics-port", env="METRICS_PORT", show_default=False,
    help="Serve Prometheus metrics on this port (0: any free port, logged). Default: off.")]

MetricsHost = Annotated[str, _option(
    "--metrics-host", env="METRICS_HOST", help="The address --metrics-port listens on (0.0.0.0: every interface).")]

Fresh = Annotated[bool, _option(
    "--fresh", env=None,
    help="Move an existing save folder aside (renamed with a timestamp) and start over. Command line only.")]

PrintCompletion = Annotated[Optional[str], typer.Option(
    "--print-completion", "--print_completion", callback=completion.print_script, is_eager=True, show_default=False,
    metavar="[bash|zsh|fish]", help="Print the shell completion script of this command and exit (tcsh is not supported).")]

Version = Annotated[
    bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
]
