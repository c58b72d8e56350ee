"""The state machine's vocabulary: its phases, the policy it follows, its state, and the transitions
every handler shares (finish, stop, start the next generation). Pure values; see machine.py.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, replace
from enum import Enum

from pai_launch.core import exitcodes
from pai_launch.core.actions import Action, Finish, SignalRun, StartGeneration, StartInit

#: Signals that stop the run: forwarded once to every process of the run, then a deadline.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})
#: What the run's processes get for a stop signal when it is not that signal itself: SIGQUIT would make each worker
#: dump core instead of stopping the way its script handles SIGTERM.
FORWARDED_AS = {signal.SIGQUIT: signal.SIGTERM}
#: Signals passed on to the workers while supervision goes on (e.g. Slurm's pre-emption warning).
FORWARD_SIGNALS = frozenset({signal.SIGUSR1, signal.SIGUSR2})
#: What a stall sends first, so a script that handles it can dump its stacks before being stopped.
STALL_SIGNAL = signal.SIGUSR1
#: The most a hung agent's workers get to exit on SIGTERM before everything of the generation is killed: the agent
#: that would wait for them and report their end does not answer.
HUNG_AGENT_GRACE = 5.0


class Phase(Enum):
    STARTING = "starting"
    INIT = "init"
    ADOPTING = "adopting"
    TRAINING = "training"
    BACKOFF = "backoff"
    #: Every worker exited 0 and no progress is visible yet: a shared file system gets a moment to show it.
    SETTLING = "settling"
    STOPPING = "stopping"
    DONE = "done"


#: Phases in which processes of the run are running.
RUNNING = (Phase.INIT, Phase.TRAINING)
#: Phases with nothing running that a stop ends at once.
IDLE = (Phase.BACKOFF, Phase.ADOPTING, Phase.SETTLING)


class StopCause(Enum):
    """Why processes are being stopped: decides what their exit leads to."""

    SIGNAL = "signal"
    COMPLETE = "complete"
    STALL = "stall"
    SAVE_LOST = "save_lost"
    STORE_LOST = "store_lost"
    #: pai-launch's own agent stopped answering: its generation fails and is retried with a new agent.
    AGENT_HUNG = "agent_hung"


@dataclass(frozen=True)
class Policy:
    """What the run was asked to do."""

    grace: float = 30.0
    data_parallel: bool = False
    #: DataParallel training has no resume: a failure is retried (from scratch) only when the user asked for retries.
    retry_data_parallel: bool = False
    #: Consecutive failed generations without a new switch file before giving up (exit 4).
    max_failures: int = 3
    #: --max-dendrites / --max-generations: the run stops (exit 0) once the model has this many dendrites, or this
    #: many generations have run; None: no limit.
    max_dendrites: int | None = None
    max_generations: int | None = None
    #: --max-failures was given: a crash that repeats after training started is retried up to it, not only once.
    retry_repeats: bool = False
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    #: Seconds without any write to the save folder while workers run that count as a hang; None: off.
    stall_timeout: float | None = None
    #: After a stall's SIGUSR1, how long workers get to dump their stacks before they are stopped.
    stall_dump_wait: float = 5.0
    #: Seconds the agent running a generation may leave the supervisor's heartbeat unanswered before it counts as
    #: hung (stopped, killed, replaced); None: not watched (DataParallel has no agent).
    agent_silence: float | None = None
    #: No --save-name: an init run that writes its settings to another folder has that folder adopted; with one, it is
    #: a usage error.
    adopt_save_folder: bool = True
    #: Start the node's agent when the run starts (it warms up during the init run), not with the first generation.
    agent_ahead: bool = True
    #: Several nodes: a stop here is announced to the whole job, and a job-wide stop ends this node's run.
    multi_node: bool = False
    #: Seconds a shared file system may take to show another node's switch file before "no progress" is decided.
    fs_settle: float = 0.0
    node_rank: int = 0
    #: Slurm: the signal that stops the job so it can be requeued (--requeue-on); None: off.
    requeue_on: int | None = None
    #: Under srun, Slurm delivers a signal for the job step to every process in it, workers included: passing
    #: SIGUSR1/2 on as well would hand them to the workers twice.
    signals_reach_workers: bool = False


@dataclass(frozen=True)
class Stop:
    """One stop of the run's processes. Each stop starts a new one, whole: nothing of an earlier stop (its kill)
    carries over, so every stop ends in its own kill at its own deadline."""

    cause: StopCause
    #: The signal the run's processes were asked to stop with; late-starting ones get it too.
    signum: int
    #: When whatever still runs is killed.
    deadline: float
    killed: bool = False


@dataclass(frozen=True)
class GenerationRun:
    """The init run or generation now running, or the last one while what follows its end is decided (a backoff,
    a settling save folder). Starting the next one replaces it whole: nothing of it needs resetting by hand."""

    started_at: float = 0.0
    #: The last write seen in the save folder (or the generation's start), for stall detection.
    last_activity: float | None = None
    #: The workers wrote to the save folder beyond start-up files.
    reached_training: bool = False
    #: The request waits for the agent to be ready: no stall is counted meanwhile.
    workers_waiting: bool = False
    #: When the agent last answered the heartbeat (or the generation started): for a hung agent.
    agent_heard: float | None = None
    #: The completion marker appeared: workers still running then are stopped.
    marker_deadline: float | None = None
    #: A stall was reported (SIGUSR1 sent): the workers are stopped then.
    stall_stop_at: float | None = None
    #: SETTLING: when "no progress" is decided if the save folder still shows none.
    settle_deadline: float | None = None
    #: BACKOFF: when the failed generation is retried.
    retry_at: float | None = None
    stop: Stop | None = None


@dataclass(frozen=True)
class State:
    """What the run carries from one generation to the next; `current` holds what belongs to one generation alone."""

    phase: Phase = Phase.STARTING
    generation: int = 0
    #: Consecutive failed generations without progress in this invocation: the failure budget used.
    failures: int = 0
    #: A switch file proven unloadable (a rank failed loading it, and said why): the next start moves it aside.
    unloadable: str | None = None
    unloadable_why: str = ""
    #: Switch files moved aside as unloadable in this invocation: a script that never saves a loadable one ends.
    quarantined: int = 0
    #: (switch file, failure signature) of a failure in loading a switch file that gave no proof: the same again from
    #: the same file proves it.
    load_suspect: tuple | None = None
    #: The most dendrites the run has recorded (never goes down); whether a count beyond the maximum was named.
    dendrites: int = 0
    runaway_named: bool = False
    save_name: str = "PAI"
    init_done: bool = False
    last_switch: str | None = None
    exit_code: int | None = None
    reason: str = ""
    marker_seen: bool = False
    #: Signature of the last failure that happened before training was reached.
    early_failure: tuple | None = None
    #: Cause signature of the last failure after training was reached (Failure.cause_signature).
    trained_failure: tuple | None = None
    #: The node's agent has been asked for (it lives for the run; a kill takes it down, and a new one is asked for).
    agent_started: bool = False
    #: Multi-node: this node's stop has been announced to the job.
    announced: bool = False
    #: --requeue-on's signal came: once stopped, the Slurm job is requeued.
    requeue: bool = False
    #: What asked the run to stop (the signal's name, or why the job was stopped): what it ends is stopped, not failed.
    stopped_by: str | None = None
    current: GenerationRun = GenerationRun()

    def with_current(self, **changes) -> State:
        """This state with `changes` to the current generation's record."""
        return replace(self, current=replace(self.current, **changes))


# --- transitions every handler shares ----------------------------------------------------------------
def finish(state: State, code: int, reason: str) -> tuple[State, list[Action]]:
    return replace(state, phase=Phase.DONE, exit_code=code, reason=reason), [Finish(code, reason)]


def finish_stopping(state: State) -> tuple[State, list[Action]]:
    return finish(state, state.exit_code if state.exit_code is not None else exitcodes.COMPLETE, state.reason)


def stop(policy: Policy, state: State, signum: int, now: float, cause: StopCause, code: int | None,
         reason: str) -> tuple[State, list[Action]]:
    """Ask the run's processes to exit: a new stop, with its own deadline for the kill."""
    stopping = replace(state.with_current(stop=Stop(cause, signum, deadline=now + policy.grace)), phase=Phase.STOPPING,
                       exit_code=code, reason=reason)
    return stopping, [SignalRun(signum)]


def stopping_to_retry(state: State) -> bool:
    """Stopping a stalled generation (or a hung agent's), which is then retried: anything that ends the run instead
    must say so."""
    return state.phase is Phase.STOPPING and state.current.stop.cause in (StopCause.STALL, StopCause.AGENT_HUNG)


def start_init(state: State, now: float) -> tuple[State, list[Action]]:
    return replace(state, phase=Phase.INIT, current=GenerationRun(started_at=now)), [StartInit()]


def start_generation(state: State, now: float) -> tuple[State, list[Action]]:
    """The next generation; none once training is complete (the marker is terminal: nothing trains after it)."""
    if state.marker_seen:
        return finish(state, exitcodes.COMPLETE, "training complete")
    nxt = state.generation + 1
    current = GenerationRun(started_at=now, last_activity=now, agent_heard=now)
    started = replace(state, phase=Phase.TRAINING, generation=nxt, current=current, unloadable=None, unloadable_why="")
    return started, [StartGeneration(nxt, quarantine=state.unloadable, quarantine_why=state.unloadable_why)]
