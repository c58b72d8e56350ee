"""torchrun's options, one entry each (its argparse `dest`), and what pai-launch makes of each. Pure.

Either pai-launch has an option of the same meaning (typer parses it, under torchrun's dash and underscore
spellings), or a rule here turns its value into pai-launch options, a note that it does not apply, or a one-line
refusal naming the flag and why (exit 2). cli.torchrun_flags reads the command line and PET_* through this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pai_launch.placement import seconds
from pai_launch.wire import log_events
from pai_launch.wire.errors import LaunchError


class TorchrunFlagError(LaunchError, ValueError):
    """A torchrun option pai-launch cannot honour; the message names it and why."""


@dataclass(frozen=True)
class Output:
    """What one torchrun value becomes: pai-launch options (param -> value as typed), notes for the run's log."""

    options: dict[str, str] = field(default_factory=dict)
    notes: list[tuple[str, dict]] = field(default_factory=list)


@dataclass(frozen=True)
class Given:
    """One torchrun value as a rule reads it: its dest, its value, every value given beside it (by dest), and how the
    user spelled each dest (`--max-restarts`, `PET_MAX_RESTARTS`)."""

    dest: str
    value: str
    values: Mapping[str, str]
    spell: Callable[[str], str]

    @property
    def flag(self) -> str:
        return self.spell(self.dest)


Rule = Callable[[Given], Output]


@dataclass(frozen=True)
class Torchrun:
    """One torchrun option: its spellings, whether it takes a value, and either the pai-launch option that means the
    same (`same`, a parameter of the launch command) or the rule that reads it; `env`: it is read from PET_<DEST> too
    (an action, not a setting, is not)."""

    dest: str
    takes_value: bool = True
    same: str | None = None
    rule: Rule | None = None
    short: str | None = None
    env: bool = True

    @property
    def spellings(self) -> tuple[str, ...]:
        long = "--" + self.dest.replace("_", "-")
        names = (long, "--" + self.dest) if "_" in self.dest else (long,)
        return (*names, self.short) if self.short else names


# --- the rules --------------------------------------------------------------------------------------------------
def _refused(why: str) -> Rule:
    def rule(given: Given) -> Output:
        raise TorchrunFlagError(f"{given.flag} is not supported: {why}")

    return rule


def _refused_unless(default: str, why: str) -> Rule:
    """Accepted at torchrun's default (a platform may set it so), refused otherwise."""

    def rule(given: Given) -> Output:
        return Output() if given.value.strip() in ("", default) else _refused(why)(given)

    return rule


def _ignored(why: str, default: str | None = None) -> Rule:
    """Accepted, with a note saying it does not apply (none at torchrun's default)."""

    def rule(given: Given) -> Output:
        if default is not None and given.value.strip() == default:
            return Output()
        return Output(notes=[(log_events.TORCHRUN_FLAG_IGNORED, {"flag": given.flag, "value": given.value,
                                                                 "why": why})])

    return rule


def _mapped(given: Given, option: str, option_value: str, why: str) -> tuple[str, dict]:
    return (log_events.TORCHRUN_FLAG_MAPPED, {"flag": given.flag, "value": given.value,
                                              "as_option": f"{option} {option_value}", "why": why})


def _max_restarts(given: Given) -> Output:
    text = given.value.strip()
    if not (text.isascii() and text.isdigit()):
        raise TorchrunFlagError(f"{given.flag} {given.value!r} is not a number of restarts: give e.g. 3")
    failures = str(int(text) + 1)
    why = ("torchrun counts restarts of the worker group over the whole run; pai-launch gives up after this many "
           "failed generations in a row without a new switch file")
    return Output({"max_failures": failures}, [_mapped(given, "--max-failures", failures, why)])


def _shutdown_timeout(given: Given) -> Output:
    return Output({"grace": given.value.strip()})


def _master(given: Given) -> Output:
    """torchrun's static rendezvous: node 0's address and port, where its store listens (29500 by default)."""
    if given.values.get("rdzv_endpoint", "").strip():
        return Output()  # the endpoint was given: torchrun uses it over master_addr:master_port too
    host = given.values.get("master_addr", "").strip() or DEFAULT_MASTER_ADDR
    port = given.values.get("master_port", "").strip() or str(DEFAULT_MASTER_PORT)
    if not (port.isascii() and port.isdigit()):
        raise TorchrunFlagError(f"{given.spell('master_port')} {port!r} is not a port: give 1-65535, e.g. 29500")
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return Output({"rdzv_endpoint": f"{host}:{port}"})


#: torchrun's static rendezvous defaults.
DEFAULT_MASTER_ADDR = "127.0.0.1"
DEFAULT_MASTER_PORT = 29500
#: The rendezvous backends whose meaning pai-launch keeps (placement.joboptions.BACKENDS), read by --rdzv-backend.
BACKENDS = ("c10d", "static")


def _rdzv_backend(given: Given) -> Output:
    if given.value.strip() in BACKENDS:
        return Output({"rdzv_backend": given.value.strip()})
    raise TorchrunFlagError(f"{given.flag} {given.value!r} is not supported: pai-launch's rendezvous is c10d in "
                            f"a store node 0 serves; give c10d or static (with the endpoint or master address)")


#: --rdzv-conf keys that mean how long to wait for the rendezvous: pai-launch's --rdzv-timeout.
TIMEOUT_KEYS = ("join_timeout", "timeout")


def _rdzv_conf(given: Given) -> Output:
    settings: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in given.value.split(","))):
        key, sep, setting = item.partition("=")
        if not sep:
            raise TorchrunFlagError(f"{given.flag} item {item!r} is not KEY=VALUE: give e.g. join_timeout=900")
        settings[key.strip()] = setting.strip()
    others = [key for key in settings if key not in TIMEOUT_KEYS]
    if others:
        raise TorchrunFlagError(f"{given.flag} key {others[0]!r} is not supported: pai-launch reads only "
                                f"{' and '.join(TIMEOUT_KEYS)} (as --rdzv-timeout); drop the others")
    key = next((key for key in TIMEOUT_KEYS if key in settings), None)
    if key is None:
        return Output()
    # Judged here, by what was given: as --rdzv-timeout it would be blamed on an option the user never gave.
    try:
        wrong = seconds.problem("--rdzv-timeout", float(settings[key])) is not None
    except ValueError:
        wrong = True
    if wrong:
        raise TorchrunFlagError(f"{given.flag} {key}={settings[key]} is not a number of seconds above 0 (at most a "
                                "week): "
                                f"give e.g. {key}=900")
    return Output({"rdzv_timeout": settings[key]})


def _standalone(given: Given) -> Output:
    """One machine is what pai-launch runs without --nnodes: --standalone keeps a platform from making it several."""
    if not truth(given.value):
        return Output()
    nnodes = given.values.get("nnodes", "").strip()
    if nnodes and nnodes.split(":")[-1] != "1":
        raise TorchrunFlagError(f"{given.flag} runs on one machine but --nnodes is {nnodes}: drop one of them")
    return Output({"nnodes": "1"})


#: What pai-launch does with signals, whatever torchrun's list says.
HANDLED_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
SIGNALS_DEFAULT = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"


def _signals_to_handle(given: Given) -> Output:
    names = [part.strip().upper() for part in given.value.split(",") if part.strip()]
    names = [item if item.startswith("SIG") else "SIG" + item for item in names]
    unknown = [item for item in names if item not in HANDLED_SIGNALS]
    if unknown:
        raise TorchrunFlagError(f"{given.flag} names {unknown[0]}, which pai-launch does not handle: it "
                                "stops the run on SIGTERM, SIGINT, SIGHUP and SIGQUIT and forwards SIGUSR1 and "
                                "SIGUSR2 "
                                f"to the workers; drop {unknown[0]}")
    if ",".join(names) == SIGNALS_DEFAULT:
        return Output()
    return _ignored("pai-launch stops the run on SIGTERM, SIGINT, SIGHUP and SIGQUIT and forwards SIGUSR1 and SIGUSR2 "
                    "to the workers, whatever the list")(given)


def truth(value: str) -> bool:
    """A torchrun flag's value from the environment (PET_STANDALONE=1), or True when given on the command line."""
    return value.strip().lower() in ("1", "true", "yes", "on")


#: Every torchrun option by its dest (tests/unit/test_torchrun_flags.py holds it to the installed torch's parser).
TORCHRUN = {entry.dest: entry for entry in (
    Torchrun("nnodes", same="nnodes"),
    Torchrun("nproc_per_node", same="nproc"),
    Torchrun("rdzv_backend", rule=_rdzv_backend),
    Torchrun("rdzv_endpoint", same="rdzv_endpoint"),
    Torchrun("rdzv_id", same="rdzv_id"),
    Torchrun("rdzv_conf", rule=_rdzv_conf),
    Torchrun("standalone", takes_value=False, rule=_standalone),
    Torchrun("max_restarts", rule=_max_restarts),
    Torchrun("monitor_interval", rule=_ignored("pai-launch sees each worker's exit as it happens, without polling")),
    Torchrun("start_method", rule=_ignored("warm workers are forks of the agent's preloaded forkserver and cold "
                                           "ones (--cold) fresh interpreters, whatever the start method")),
    Torchrun("event_log_handler", rule=_ignored("pai-launch logs its own events (its log lines and "
                                                "SAVE/.pai-launch/events.jsonl), not torch's", default="null")),
    Torchrun("role", rule=_ignored("every worker has torch's default role", default="default")),
    Torchrun("module", takes_value=False, same="module", short="-m"),
    Torchrun("no_python", takes_value=False, same="no_python"),
    Torchrun("run_path", takes_value=False, rule=_ignored(
        "warm workers already run the script with runpy.run_path, each in a fork of a preloaded interpreter", "0")),
    Torchrun("log_dir", same="log_dir"),
    Torchrun("redirects", short="-r", same="redirects"),
    Torchrun("tee", short="-t", same="tee"),
    Torchrun("local_ranks_filter", same="local_ranks_filter"),
    Torchrun("log_line_prefix_template", same="log_line_prefix_template"),
    Torchrun("duplicate_stdout_filters", rule=_refused_unless(
        "", "filter the ranks' files that --log-dir keeps (each rank's stdout.log) instead")),
    Torchrun("duplicate_stderr_filters", rule=_refused_unless(
        "", "filter the ranks' files that --log-dir keeps (each rank's stderr.log) instead")),
    Torchrun("node_rank", same="node_rank"),
    Torchrun("master_addr", rule=_master),
    Torchrun("master_port", rule=_master),
    Torchrun("local_addr", same="local_addr"),
    Torchrun("logs_specs", rule=_refused("pai-launch keeps every rank's output itself (--log-dir DIR); a LogsSpecs "
                                         "entry point cannot replace it")),
    Torchrun("numa_binding", rule=_refused("pai-launch does not bind workers to NUMA nodes; bind inside the script "
                                           "(os.sched_setaffinity) or drop it")),
    Torchrun("signals_to_handle", rule=_signals_to_handle),
    Torchrun("shutdown_timeout", rule=_shutdown_timeout),
    Torchrun("virtual_local_rank", takes_value=False, rule=_refused_unless(
        "0", "each worker's LOCAL_RANK is its index on the node; select the device by LOCAL_RANK in the script")),
    Torchrun("print_completion", same="print_completion", env=False),
)}
#: torchrun's arguments that are no options: pai-launch's SCRIPT and its arguments, and its own -h/--help.
POSITIONAL = ("training_script", "training_script_args", "help")
#: How each spelling of a torchrun option that pai-launch does not declare itself names its entry.
BY_SPELLING = {spelling: entry for entry in TORCHRUN.values() if entry.same is None for spelling in entry.spellings}
#: pai-launch's parameter -> the torchrun dest of the same meaning.
DEST_OF_SAME = {entry.same: dest for dest, entry in TORCHRUN.items() if entry.same is not None}
