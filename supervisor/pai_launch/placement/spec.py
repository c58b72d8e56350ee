"""The launch specification built from the command line, and the policy the state machine follows from it.

Pure values: cli.specbuilder resolves a spec from the command line, and cli.preflight checks it against the machine
before anything starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pai_launch.core.state import Policy
from pai_launch.placement.nodes import Nodes
from pai_launch.savefmt.adoptions import Adoption
from pai_launch.wire.errors import LaunchError

RESERVED_SCRIPT_FLAGS = ("--perforate_model_parallel", "--pai_load_folder")
#: --resume-from's choices: the checkpoint a restart resumes from.
RESUME_STAGES = ("switch", "latest")
#: --restructure's choices: what the workers do when PerforatedAI adds dendrites.
RESTART, IN_PROCESS = "restart", "in-process"
RESTRUCTURE_MODES = (RESTART, IN_PROCESS)
LOG_FORMATS = ("auto", "console", "json")
#: Seconds the agent running a generation may leave pai-launch's heartbeat unanswered before it is a hung agent.
AGENT_SILENCE = 30.0
#: For pai-launch's own tests only: a shorter bound than AGENT_SILENCE (seconds), so a hung agent is found quickly.
AGENT_SILENCE_TEST_ENV = "PAI_LAUNCH_TEST_AGENT_SILENCE"
#: How long a file written on another node may take to show up here: NFS caches directory attributes
#: for up to 30 s by default (acdirmin). Used with --nnodes above 1 or --poll; 0 on one machine.
SHARED_FS_SETTLE = 30.0
#: The save folder without --save-name: perforate_model's own default.
DEFAULT_SAVE_NAME = "PAI"
#: Consecutive failed generations allowed without --max-failures.
DEFAULT_MAX_FAILURES = 3
#: How SCRIPT is run, as torchrun's -m and --no-python say: `python -u SCRIPT`, `python -u -m MODULE`, or the program
#: itself with no interpreter.
SCRIPT, MODULE, PROGRAM = "script", "module", "program"


class PreflightError(LaunchError):
    """A problem with the command line or the machine, found before anything started."""


@dataclass(frozen=True)
class LaunchSpec:
    """Everything one pai-launch run needs to know, resolved from the command line.

    `workdir` (where the script runs and the save folder lives) and `python` (the interpreter for the
    script and the agent) are always given: nothing here is taken from the calling process.
    """

    script: Path
    workdir: Path
    python: str
    script_args: tuple[str, ...] = ()
    #: SCRIPT, MODULE (`script` names a module, -m) or PROGRAM (`script` is run without python, --no-python).
    runs_as: str = SCRIPT
    nproc: int = 1
    save_name: str = DEFAULT_SAVE_NAME
    #: No --save-name: the folder the script really writes may become the save folder (a folder recorded as adopted
    #: for this command is used, and an init run that writes elsewhere has its folder adopted).
    adopt_save_folder: bool = True
    #: save_name comes from the record of adopted folders; this was the command's own (its key in that record).
    adopted_from: str | None = None
    gpus: tuple[str, ...] | None = None
    grace: float = 30.0
    log_format: str = "auto"
    log_dir: Path | None = None
    #: (local rank, "stdout" or "stderr") the console does not show (--redirects, --local-ranks-filter); files keep all.
    muted: tuple[tuple[int, str], ...] = ()
    #: What starts each relayed line of a rank (--log-line-prefix-template, wire.lineprefix); None: `[rankN]: `.
    line_prefix_template: str | None = None
    poll: bool = False
    reinit: bool = False
    data_parallel: bool = False
    dry_run: bool = False
    fresh: bool = False
    #: SCRIPT as given on the command line (`./prog` keeps its `./`, which a Path drops).
    script_text: str = ""
    max_failures: int = DEFAULT_MAX_FAILURES
    #: --max-failures names a budget: DataParallel runs are retried only then, and a crash that repeats after training
    #: started is retried up to it, not only once.
    retries_requested: bool = False
    #: --max-dendrites / --max-generations: the run stops (exit 0) at this many dendrites or generations; None: no
    #: limit.
    max_dendrites: int | None = None
    max_generations: int | None = None
    backoff: float = 1.0
    backoff_max: float = 60.0
    stall_timeout: float | None = None
    nodes: Nodes = Nodes()
    #: --requeue-on: the signal on which the Slurm job is stopped and requeued; None: off.
    requeue_on: int | None = None
    slurm_job_id: str | None = None
    #: SLURM_RESTART_COUNT: how many times Slurm has requeued this job (0 on its first run).
    slurm_restart_count: int = 0
    #: Running as a task of a Slurm job step (srun): Slurm signals every process of the step itself.
    slurm_step: bool = False
    #: Seconds a shared file system may take to show a file another node wrote (--fs-settle, else default_fs_settle).
    fs_settle: float = 0.0
    #: --cold: workers are fresh interpreters; else forks of the agent's forkserver, preloaded with `preload`
    #: (None: the agent's default).
    cold: bool = False
    preload: tuple[str, ...] | None = None
    #: --resume-from: which of the script's checkpoints a restart resumes from, "switch" (SAVE/switch_N.pt) or
    #: "latest" (SAVE/latest.pt, written every epoch); None: what doctor reads in the script, else "switch".
    resume_from: str | None = None
    #: --restructure: "restart" (workers exit at a restructure, the next generation resumes) or "in-process" (the
    #: script's training.after_restructure rebuilds DDP and trains on in the same workers).
    restructure: str = RESTART
    #: Check the script with doctor before starting (warnings only); off with --no-doctor.
    doctor: bool = True
    #: --metrics-port / --metrics-host: serve Prometheus metrics there; None: off.
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"

    @property
    def agent_args(self) -> tuple[str, ...]:
        """How the agent is told to make its workers."""
        if self.cold:
            return ("--cold",)
        return () if self.preload is None else ("--preload", ",".join(self.preload))

    @property
    def save_dir(self) -> Path:
        return self.workdir / self.save_name

    def adoption(self, save_name: str, run_id: str = "") -> Adoption:
        """This command's adoption of `save_name`, in the plain values the save format's record keeps."""
        return Adoption.command(self.workdir / self.script, self.script_args, self.adopted_from or self.save_name,
                                save_name, run_id)


def default_fs_settle(nodes: Nodes, poll: bool) -> float:
    """Without --fs-settle: SHARED_FS_SETTLE where the save folder is shared (several nodes, --poll), else 0."""
    return SHARED_FS_SETTLE if (nodes.multi or poll) else 0.0


def policy_for(spec: LaunchSpec, environ: Mapping[str, str]) -> Policy:
    """What the state machine is asked to do, from the command line (and, for tests, AGENT_SILENCE_TEST_ENV)."""
    return Policy(
        grace=spec.grace, data_parallel=spec.data_parallel, retry_data_parallel=spec.retries_requested,
        max_failures=spec.max_failures, retry_repeats=spec.retries_requested, backoff_initial=spec.backoff,
        max_dendrites=spec.max_dendrites, max_generations=spec.max_generations,
        backoff_max=spec.backoff_max,
        stall_timeout=spec.stall_timeout, stall_dump_wait=min(5.0, spec.grace),
        adopt_save_folder=spec.adopt_save_folder, multi_node=spec.nodes.multi, fs_settle=spec.fs_settle,
        node_rank=spec.nodes.node_rank, requeue_on=spec.requeue_on,
        signals_reach_workers=spec.slurm_step, agent_silence=None if spec.data_parallel else agent_silence(environ),
    )


def agent_silence(environ: Mapping[str, str]) -> float:
    """AGENT_SILENCE, or the shorter bound a test asked for (a value that is not a positive number is ignored)."""
    try:
        value = float(environ.get(AGENT_SILENCE_TEST_ENV, ""))
    except ValueError:
        return AGENT_SILENCE
    return value if 0 < value < AGENT_SILENCE else AGENT_SILENCE
