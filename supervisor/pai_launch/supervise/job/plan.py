"""Pure construction of every command pai-launch runs: argv, environment additions, working directory.

The same functions feed both the real launch and --dry-run, so the plan printed is the plan run.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pai_launch
from pai_launch.placement.spec import IN_PROCESS, MODULE, PROGRAM, LaunchSpec
from pai_launch.wire.protocol import GenerationRequest, NodeRequest

RUN_ID_ENV = "PAI_LAUNCH_RUN_ID"
GENERATION_ENV = "PAI_LAUNCH_GENERATION"
#: What the workers are told with --restructure in-process (pai_launch.in_process reads the same names).
RESTRUCTURE_ENV = "PAI_LAUNCH_RESTRUCTURE"
RECORDS_ENV = "PAI_LAUNCH_RESTRUCTURES"
SAVE_DIR_ENV = "PAI_LAUNCH_SAVE_DIR"
INIT_FLAG = "--perforate_model_parallel"
LOAD_FLAG = "--pai_load_folder"


@dataclass(frozen=True)
class Command:
    """A process to start: what runs, what it gets on top of pai-launch's environment, and where."""

    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    #: Variables of pai-launch's environment the process must not see.
    unset: tuple[str, ...] = ()


#: What tells a script it is one rank of a launched job (torchrun's, Slurm's): the init run is one plain process, so
#: a script that reads them (torchvision's init_distributed_mode reads SLURM_PROCID) must not find them there, even
#: when pai-launch itself runs as a Slurm task or under torchrun.
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                  "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "SLURM_PROCID", "SLURM_LOCALID")


def package_root() -> str:
    """The folder holding the `pai_launch` package (site-packages, or a checkout's supervisor/): a child started with
    `python -c` puts it first on its path, so it runs this very copy of pai-launch, installed or not."""
    return str(Path(pai_launch.__file__).resolve().parent.parent)


def new_run_id(env: dict[str, str], now: float | None = None) -> str:
    """One id for the whole run; a caller may fix it with PAI_LAUNCH_RUN_ID (e.g. to resume a logger run)."""
    if env.get(RUN_ID_ENV):
        return env[RUN_ID_ENV]
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


def path_safe(run_id: str) -> str:
    """`run_id` as one folder name: PAI_LAUNCH_RUN_ID is the user's, and a slash or `..` in it must not lead a log
    folder named after it out of its parent, nor a leading dot hide it (from globs, from `ls`)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)
    return "_" + name[1:] if name.startswith(".") else name or "_"


def new_elastic_run_id(run_id: str, generation: int) -> str:
    """A fresh rendezvous id per generation, so no stale store or peer address is reused (torch names each rank's
    log folder after it, so it is path-safe)."""
    return f"{path_safe(run_id)}-g{generation}-{uuid.uuid4().hex[:6]}"


def script_arg(spec: LaunchSpec) -> str:
    """The script as python's argument: a relative path starting with '-' (pathlib turns ./-train.py into -train.py)
    gets ./ back, so python runs it as a file instead of reading it as an option. A module's name is as given."""
    if spec.runs_as == PROGRAM and "/" in spec.script_text:
        return spec.script_text  # a path, as a shell runs it; a bare name is looked up on PATH
    text = str(spec.script)
    return f"./{text}" if text.startswith("-") and spec.runs_as != MODULE else text


def program(spec: LaunchSpec) -> tuple[str, ...]:
    """What every process of the run starts with, before the script's arguments: `python -u SCRIPT`,
    `python -u -m MODULE` (-m), or the program alone (--no-python)."""
    if spec.runs_as == PROGRAM:
        return (script_arg(spec),)
    if spec.runs_as == MODULE:
        return (spec.python, "-u", "-m", script_arg(spec))
    return (spec.python, "-u", script_arg(spec))


def init_command(spec: LaunchSpec, run_id: str, visible: tuple[str, ...]) -> Command:
    """`python -u SCRIPT --perforate_model_parallel ARGS`: one process, first GPU only, with no rank variables."""
    env = {RUN_ID_ENV: run_id, GENERATION_ENV: "0"}
    if visible:
        env["CUDA_VISIBLE_DEVICES"] = visible[0]
    argv = (*program(spec), INIT_FLAG, *spec.script_args)
    return Command(argv, env, spec.workdir, unset=RANK_VARIABLES)


def worker_command(spec: LaunchSpec, load_folder: str | None) -> tuple[str, ...]:
    """Every worker's command: `python -u SCRIPT ARGS [--pai_load_folder SAVE]` (or as `program` has it)."""
    argv = (*program(spec), *spec.script_args)
    return (*argv, LOAD_FLAG, load_folder) if load_folder else argv


def generation_env(spec: LaunchSpec, run_id: str, generation: int, base_env: dict[str, str],
                   save_dir: Path | None = None, records: Path | None = None) -> dict[str, str]:
    """What workers get on top of pai-launch's environment (torch adds RANK, WORLD_SIZE, ...); with --restructure
    in-process, the mode (training.after_restructure reads it) and where rank 0 records each restructure."""
    env = {RUN_ID_ENV: run_id, GENERATION_ENV: str(generation)}
    if spec.restructure == IN_PROCESS and not spec.data_parallel:
        env[RESTRUCTURE_ENV] = IN_PROCESS
        if records is not None:
            env[RECORDS_ENV] = str(records.absolute())
            env[SAVE_DIR_ENV] = str((save_dir or spec.save_dir).absolute())
    if "OMP_NUM_THREADS" not in base_env:
        env["OMP_NUM_THREADS"] = "1"
    if spec.gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(spec.gpus)
    return env


def job_id(spec: LaunchSpec, run_id: str) -> str:
    """The job's rendezvous id: --rdzv-id (a Slurm job id), else the run id every node shares."""
    return spec.nodes.rdzv_id or run_id


def generation_request(spec: LaunchSpec, run_id: str, generation: int, load_folder: str | None,
                       base_env: dict[str, str],
                       log_dir: str, save_dir: Path | None = None, failures: int = 0,
                       records: Path | None = None) -> GenerationRequest:
    """What the agent is handed for one generation: its workers' command, environment and log folder (and, in a
    multi-node job, where the job's store is)."""
    nodes = None
    if spec.nodes.multi:
        n = spec.nodes
        nodes = NodeRequest(node_rank=n.node_rank, min_nodes=n.min_nodes, max_nodes=n.max_nodes, host=n.host,
                            port=n.port,
                            rdzv_timeout=n.rdzv_timeout, job_id=job_id(spec, run_id),
                            save_dir=str(save_dir or spec.save_dir),
                            fs_settle=spec.fs_settle, local_addr=n.local_addr, failures=failures, secret=n.secret)
    argv = worker_command(spec, load_folder)
    no_python = spec.runs_as == PROGRAM
    return GenerationRequest(
        generation=generation, nproc=spec.nproc, python=spec.python, args=argv if no_python else argv[1:],
        env=generation_env(spec, run_id, generation, base_env, save_dir, records), log_dir=log_dir, grace=spec.grace,
        elastic_run_id=new_elastic_run_id(run_id, generation), nodes=nodes, no_python=no_python, muted=spec.muted,
        line_prefix_template=spec.line_prefix_template,
    )


def data_parallel_command(spec: LaunchSpec, run_id: str, generation: int) -> Command:
    """DataParallel mode: one plain `python -u SCRIPT ARGS` with every selected GPU visible (and no rank variables).

    No --pai_load_folder: the DataParallel workflow restructures inside one process and has no resume.
    """
    env = {RUN_ID_ENV: run_id, GENERATION_ENV: str(generation)}
    if spec.gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(spec.gpus)
    return Command(worker_command(spec, None), env, spec.workdir, unset=RANK_VARIABLES)


def describe(spec: LaunchSpec, run_id: str, visible: tuple[str, ...], base_env: dict[str, str], *, needs_init: bool,
             resume_folder: str | None) -> list[str]:
    """The --dry-run plan, one phase per block."""
    lines = [f"pai-launch plan (run id {run_id}, working directory {spec.workdir})", f"save folder: {spec.save_dir}"]

    def block(title: str, argv: tuple[str, ...], env: dict[str, str]) -> None:
        lines.append(f"{title}:")
        lines.append("  command: " + " ".join(_quote(part) for part in argv))
        lines.append("  env: " + (" ".join(f"{key}={_quote(value)}" for key, value in sorted(env.items())) or "(none)"))
        lines.append(f"  cwd: {spec.workdir}")

    if needs_init:
        init = init_command(spec, run_id, visible)
        block("init run (1 process, stdin /dev/null)", init.argv, init.env)
    elif spec.nodes.multi and not spec.nodes.coordinator:
        lines.append("init run: node 0's (this node waits for its outputs in the shared save folder)")
    else:
        lines.append("init run: skipped (the save folder already holds its outputs and switch files)")
    if spec.data_parallel:
        dp = data_parallel_command(spec, run_id, 1)
        block("training (DataParallel: 1 process, restructures happen inside it)", dp.argv, dp.env)
        return lines
    first_load = resume_folder
    env = generation_env(spec, run_id, 1, base_env)
    if spec.nodes.multi:
        n = spec.nodes
        lines.append(f"nodes: {n.describe()}; rendezvous id {job_id(spec, run_id)}-gN per generation"
                     + (" (this node serves the store)" if n.coordinator else " (node 0 serves the store)"))
    where = ("c10d rendezvous in node 0's store at " + spec.nodes.endpoint) if spec.nodes.multi else \
        "c10d rendezvous on a free local port"
    block(
        f"generation 1 ({spec.nproc} workers, torch elastic agent, {where})",
        worker_command(spec, first_load),
        env,
    )
    if spec.restructure == IN_PROCESS:
        lines.append(
            f"restructures: in-process (--restructure in-process): the workers rebuild DDP at each switch_*.pt and "
            f"train on; generation 2, 3, ... only after a failure, with {LOAD_FLAG} {spec.save_name} and "
            f"{GENERATION_ENV}=N; stop when {spec.save_name}/.training_complete appears")
        return lines
    lines.append(
        f"generation 2, 3, ...: same, with {LOAD_FLAG} {spec.save_name} and {GENERATION_ENV}=N, "
        f"relaunched whenever a generation writes a switch_*.pt; stop when {spec.save_name}/.training_complete appears"
    )
    return lines


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)
