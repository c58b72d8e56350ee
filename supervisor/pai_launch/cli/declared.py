"""Each launch option declared once: its flags (torchrun's spellings among them), its PAI_LAUNCH_ variable, its help,
its type and default, and the LaunchSpec field it fills. The launch command's signature (cli.launch), its record
(cli.specbuilder.CommandLine) and the spec's fields taken as typed all follow from OPTIONS."""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from pai_launch import __version__
from pai_launch.cli import completion, optionvalues
from pai_launch.placement import nodes


def _version(value: bool) -> None:
    if value:
        print(f"pai-launch {__version__}")
        raise typer.Exit(0)


#: Every option but --fresh can also come from PAI_LAUNCH_<NAME> (a unit's Environment=, a container's -e); the
#: command line wins. --fresh stays on the command line: from the environment it would move the save folder aside
#: at every restart of a service, throwing away the resume it exists for.
ENV_PREFIX = "PAI_LAUNCH_"

#: `fills` of an option the spec builder resolves with other values (the machine, Slurm, other options).
RESOLVED = "resolved by cli.specbuilder"
#: `fills` of an option that acts on the command line itself and never reaches the spec (--version).
COMMAND_ONLY = "command line only"
#: The default of a required argument.
REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class Declared:
    """One option: its parameter name, type and default, typer's declaration, and where its value goes: a LaunchSpec
    field (as typed, or through `convert`), RESOLVED or COMMAND_ONLY."""

    name: str
    kind: object
    default: object
    info: typer.models.ParameterInfo
    fills: str
    convert: Callable[[object], object] | None = None

    def parameter(self) -> inspect.Parameter:
        """The parameter typer reads: Annotated with the declaration, as a written signature would carry it."""
        return inspect.Parameter(self.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=self.default,
                                 annotation=Annotated[self.kind, self.info])

    def spec_value(self, typed: object) -> object:
        return typed if self.convert is None else self.convert(typed)


def _option(name: str, kind: object, default: object, *flags: str, env: str | None, fills: str, help: str,
            convert: Callable | None = None, **kwargs) -> Declared:
    info = typer.Option(*flags, help=help, envvar=None if env is None else ENV_PREFIX + env, **kwargs)
    return Declared(name, kind, default, info, fills, convert)


def _argument(name: str, kind: object, default: object, *, fills: str, convert: Callable | None = None,
              **kwargs) -> Declared:
    return Declared(name, kind, default, typer.Argument(**kwargs), fills, convert)


def _command_option(name: str, kind: object, default: object, *flags: str, fills: str, **kwargs) -> Declared:
    return Declared(name, kind, default, typer.Option(*flags, **kwargs), fills)


OPTIONS: tuple[Declared, ...] = (
    # As text: a Path would drop a program's leading ./ (--no-python ./prog runs that file, prog a program on PATH).
    _argument("script", str, REQUIRED, fills=RESOLVED,
        help="The training script (run with `python -u`); with -m a module, with --no-python a program.",
        show_default=False),
    _argument("script_args", Optional[list[str]], None, fills="script_args", convert=optionvalues.arguments,
        help="Arguments for the script; everything after SCRIPT goes to it.", show_default=False),
    _option("module", bool, False, "-m", "--module", env="MODULE", fills=RESOLVED,
        help="SCRIPT is a module: run `python -u -m SCRIPT`, as torchrun -m does."),
    _option("no_python", bool, False, "--no-python", "--no_python", env="NO_PYTHON", fills=RESOLVED,
        help="Run SCRIPT itself, without python (an executable on PATH or a path), as torchrun --no-python does; its "
             "workers start cold."),
    _option("nproc", Optional[str], None, "--nproc", "--nproc-per-node", "--nproc_per_node", env="NPROC",
        show_default=False, parser=optionvalues.parse_nproc, fills=RESOLVED,
        help="Worker processes on this machine: N, gpu (the visible GPUs), auto (the visible GPUs, else the CPUs) or "
             "cpu (the CPUs this process may run on). Default: the visible GPUs, else 1."),
    _option("save_name", Optional[str], None, "--save-name", env="SAVE_NAME", show_default=False, fills=RESOLVED,
        help="The save_name the script passes to UPA.perforate_model, relative to the working directory. [default: "
        "PAI]"),
    _option("gpus", Optional[str], None, "--gpus", env="GPUS", show_default=False, fills=RESOLVED,
        help="GPUs to use, e.g. 0,1,2 (sets CUDA_VISIBLE_DEVICES; the init run gets the first)."),
    _option("grace", float, 30.0, "--grace", env="GRACE", fills="grace",
        help="Seconds stopping processes may take before they are killed."),
    _option("log_format", str, "auto", "--log-format", env="LOG_FORMAT", fills="log_format",
        help="auto (console on a terminal, else JSON), console or json."),
    _option("log_dir", Optional[Path], None, "--log-dir", "--log_dir", env="LOG_DIR", show_default=False,
        fills=RESOLVED,
        help="Keep every rank's stdout/stderr of every generation in files under DIR."),
    _option("redirects", str, "0", "-r", "--redirects", env="REDIRECTS", fills=RESOLVED,
        help="Keep these streams off the console, in the files --log-dir keeps only, as torchrun does: 0 none, 1 "
        "stdout, "
             "2 stderr, 3 both, for every local rank (3) or rank by rank (0:1,1:2). Needs --log-dir."),
    _option("tee", str, "0", "-t", "--tee", env="TEE", fills=RESOLVED,
        help="Streams shown on the console and kept in files (torchrun's values, as --redirects); every stream is, "
             "unless --redirects keeps it off."),
    _option("local_ranks_filter", str, "", "--local-ranks-filter", "--local_ranks_filter", env="LOCAL_RANKS_FILTER",
        fills=RESOLVED,
        help="Show only these local ranks' output on the console, e.g. 0 or 0,1 (their files keep everything). "
             "Default: every rank."),
    _option("log_line_prefix_template", Optional[str], None, "--log-line-prefix-template",
        "--log_line_prefix_template", env="LOG_LINE_PREFIX_TEMPLATE", show_default=False, fills=RESOLVED,
        help="What starts each relayed line of a rank, as torchrun's template: ${rank}, ${local_rank}, ${role_name} "
        "and "
             "${hostname} become the worker's, $$ is a literal $ (e.g. '[${hostname}:${rank}] '). "
             "Default: TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, else [rankN]: ([rankN nodeR]: on several machines)."),
    _option("poll", bool, False, "--poll", env="POLL", fills="poll",
        help="Watch the save folder by polling (network file systems)."),
    _option("reinit", bool, False, "--reinit", env="REINIT", fills="reinit",
        help="Run the init run even when the save folder already holds its outputs."),
    _option("data_parallel", bool, False, "--data-parallel", env="DATA_PARALLEL", fills="data_parallel",
        help="DataParallel workflow: init run, then one plain process with every GPU; no restarts."),
    _option("dry_run", bool, False, "--dry-run", env="DRY_RUN", fills="dry_run",
        help="Print the plan (commands, environment, directory) and start nothing."),
    _option("max_failures", Optional[int], None, "--max-failures", env="MAX_FAILURES", show_default=False,
        fills=RESOLVED,
        help="Consecutive failed generations without a new switch file before giving up (exit 4). With "
        "--data-parallel, "
             "giving it allows retries (from the start). [default: 3]"),
    _option("max_dendrites", Optional[int], None, "--max-dendrites", env="MAX_DENDRITES", show_default=False,
        fills="max_dendrites",
        help="Stop the run (exit 0) once the model has this many dendrites, complete or not. Default: no limit."),
    _option("max_generations", Optional[int], None, "--max-generations", env="MAX_GENERATIONS", show_default=False,
        fills="max_generations",
        help="Stop the run (exit 0) after this many generations, complete or not. Default: no limit."),
    _option("backoff", float, 1.0, "--backoff", env="BACKOFF", fills="backoff",
        help="Seconds before the first retry of a failed generation; doubles each time."),
    _option("backoff_max", float, 60.0, "--backoff-max", env="BACKOFF_MAX", fills="backoff_max",
        help="Longest wait between retries, in seconds."),
    _option("stall_timeout", Optional[float], None, "--stall-timeout", env="STALL_TIMEOUT", show_default=False,
        fills="stall_timeout",
        help="Treat a generation as hung after this many seconds without any write to the save folder: SIGUSR1, then "
             "stop and retry. Default: off."),
    _option("nnodes", Optional[str], None, "--nnodes", env="NNODES", show_default=False, fills=RESOLVED,
        help="Machines in the job: N, or MIN:MAX to go on with fewer when one is lost. [default: 1, or Slurm's]"),
    _option("node_rank", Optional[int], None, "--node-rank", "--node_rank", env="NODE_RANK", show_default=False,
        fills=RESOLVED,
        help="This machine's place, 0..N-1. Node 0 runs the init run and serves the rendezvous store at "
             "--rdzv-endpoint. [default: 0, or SLURM_NODEID]"),
    _option("rdzv_backend", Optional[str], None, "--rdzv-backend", env="RDZV_BACKEND", show_default=False,
        fills=RESOLVED,
        help="static or c10d, as torchrun has them: pai-launch's rendezvous is c10d in node 0's store either way; with "
             "c10d a node given no --node-rank finds it from its host name (0 on the rendezvous host, N on a pod "
             "named like it with index N), else is refused. [default: static: no --node-rank is node 0]"),
    _option("rdzv_endpoint", Optional[str], None, "--rdzv-endpoint", "--rdzv_endpoint", env="RDZV_ENDPOINT",
        show_default=False, fills=RESOLVED,
        help="HOST[:PORT] of node 0, the same on every node (port default 29400). Needed with --nnodes above 1. "
             "In Slurm: the first host of the job's node list, port 29400 + job id % 1000."),
    _option("rdzv_id", Optional[str], None, "--rdzv-id", "--rdzv_id", env="RDZV_ID", show_default=False, fills=RESOLVED,
        help="The job's rendezvous id (each generation rendezvouses as ID-gN). Default: slurm-JOBID in Slurm, "
             "else node 0's run id."),
    _option("rdzv_timeout", float, nodes.DEFAULT_RDZV_TIMEOUT, "--rdzv-timeout", env="RDZV_TIMEOUT", fills=RESOLVED,
        help="Seconds to wait for node 0's store and for every node to join a generation."),
    _option("local_addr", Optional[str], None, "--local-addr", "--local_addr", env="LOCAL_ADDR", show_default=False,
        fills=RESOLVED,
        help="The address other machines reach this one's workers at (default: torch's choice from the host name)."),
    _option("fs_settle", Optional[float], None, "--fs-settle", env="FS_SETTLE", show_default=False, fills=RESOLVED,
        help="Seconds a shared file system may take to show a file another machine wrote, before a generation counts "
             "as having made no progress. Default: 30 with --nnodes above 1 or --poll, else 0."),
    _option("use_slurm", Optional[bool], None, "--slurm/--no-slurm", env="SLURM", show_default=False, fills=RESOLVED,
        help="Take the node count, node rank, rendezvous host, job id and GPUs from the Slurm job pai-launch runs in "
             "(explicit options win). Default: when SLURM_JOB_ID is set."),
    _option("requeue_on", Optional[str], None, "--requeue-on", env="REQUEUE_ON", show_default=False, fills=RESOLVED,
        help="In Slurm: on this signal (e.g. USR1 from sbatch --signal=B:USR1@120) forward it to the workers, stop the "
             "job cleanly and requeue it (scontrol requeue); the requeued job resumes from the save folder."),
    _option("cold", bool, False, "--cold", env="COLD", fills=RESOLVED,
        help="Start every worker as a fresh interpreter, not as a fork of the agent's preloaded forkserver."),
    _option("preload", Optional[str], None, "--preload", env="PRELOAD", show_default=False, fills="preload",
        convert=optionvalues.module_names,
        help="Modules the forkserver imports once for every warm worker, comma-separated (empty: none). Modules that "
             "touch CUDA are refused by its self-check. [default: "
             "torch,torch.distributed,perforatedai.utils_perforatedai]"),
    _option("resume_from", Optional[str], None, "--resume-from", env="RESUME_FROM", show_default=False,
        fills="resume_from",
        help="What a restart resumes from, as the script loads it: switch (pass --pai_load_folder once SAVE holds a "
             "switch_N.pt) or latest (once SAVE/latest.pt exists, so a crash before the first switch resumes "
             "mid-generation). [default: what doctor reads in the script, else switch]"),
    _option("restructure", str, "restart", "--restructure", env="RESTRUCTURE", fills="restructure",
        convert=optionvalues.word,
        help="What the workers do when PerforatedAI adds dendrites: restart (exit; the next generation resumes from "
             "the switch file) or in-process (the script's training.after_restructure rebuilds DDP around the new "
             "model "
             "and trains on in the same processes; see docs/users/training-module.md)."),
    _option("no_doctor", bool, False, "--no-doctor", env="NO_DOCTOR", fills="doctor", convert=operator.not_,
        help="Skip checking the script with pai-launch doctor before the run."),
    _option("metrics_port", Optional[int], None, "--metrics-port", env="METRICS_PORT", show_default=False,
        fills="metrics_port",
        help="Serve Prometheus metrics on this port (0: any free port, logged). Default: off."),
    _option("metrics_host", str, "127.0.0.1", "--metrics-host", env="METRICS_HOST", fills="metrics_host",
        help="The address --metrics-port listens on (0.0.0.0: every interface)."),
    _option("fresh", bool, False, "--fresh", env=None, fills="fresh",
        help="Move an existing save folder aside (renamed with a timestamp) and start over. Command line only."),
    _command_option("print_completion", Optional[str], None, "--print-completion", "--print_completion",
        callback=completion.print_script, is_eager=True, show_default=False,
        metavar="[bash|zsh|fish]", fills=COMMAND_ONLY,
        help="Print the shell completion script of this command and exit (tcsh is not supported)."),
    _command_option("version", bool, False, "--version", callback=_version, is_eager=True, fills=COMMAND_ONLY,
        help="Print the version and exit."),
)

#: The options a launch reads (the command line's record, cli.specbuilder.CommandLine), in the command's order.
TYPED = tuple(option for option in OPTIONS if option.fills != COMMAND_ONLY)


def parameters() -> list[inspect.Parameter]:
    return [option.parameter() for option in OPTIONS]
