"""torchrun's command line and its PET_* environment, read as pai-launch options. Pure: values in, values out.

The same rules (cli.torchrun_table, one entry per torchrun option) read the flags on the command line (`rewrite`,
before typer parses) and torchrun's own environment variables, PET_<DEST> (`from_env`), which sit below the command
line and PAI_LAUNCH_*.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pai_launch.cli.torchrun_table import BY_SPELLING, DEST_OF_SAME, TORCHRUN, Given, Torchrun, TorchrunFlagError

ENV_PREFIX = "PET_"


# --- reading them -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OwnOptions:
    """pai-launch's own options, every spelling -> its parameter: those that take the next argument, and flags."""

    valued: Mapping[str, str]
    flags: Mapping[str, str]

    def param(self, token: str) -> str | None:
        name = token.partition("=")[0]
        return self.valued.get(name) or self.flags.get(name)


@dataclass(frozen=True)
class Read:
    """torchrun values turned into pai-launch's: options (param -> value), each one's source (param -> the flags or
    variables it came from), and the notes for the run's log."""

    options: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[tuple[str, dict]] = field(default_factory=list)


@dataclass(frozen=True)
class Rewritten:
    argv: list[str]
    read: Read


def rewrite(argv: list[str], own: OwnOptions, env: Mapping[str, str] = {}) -> Rewritten:
    """The command line with every torchrun option pai-launch does not declare turned into pai-launch's, placed
    before SCRIPT. A pai-launch option given explicitly wins over the one a torchrun flag would become; torchrun's
    variables in `env` (PET_*) are read beside the flags, as torchrun reads them (--master-port with
    PET_MASTER_ADDR)."""
    kept: list[str] = []
    given: dict[str, str] = {}
    spelled: dict[str, str] = {}
    beside: dict[str, str] = {}  # pai-launch's options of torchrun's meaning, by dest: what the rules read beside
    index = 0
    while index < len(argv):
        token = argv[index]
        if token in ("--", "-") or not token.startswith("-"):
            break
        name, sep, inline = token.partition("=")
        entry = BY_SPELLING.get(name)
        if entry is not None:
            given[entry.dest], spelled[entry.dest] = _value_of(argv, index, entry, name, inline if sep else None), name
            index += 1 if sep or not entry.takes_value else 2
            continue
        kept.append(token)
        if name in own.valued and not sep and index + 1 < len(argv):
            kept.append(argv[index + 1])
            index += 1
        if own.param(name) in DEST_OF_SAME:
            beside[DEST_OF_SAME[own.param(name)]] = inline if sep else kept[-1]
        index += 1
    read = translate(given, lambda dest: spelled.get(dest, ENV_PREFIX + dest.upper()), {**env_values(env), **beside})
    explicit = {own.param(token) for token in kept if token.startswith("-")}
    options = {param: value for param, value in read.options.items() if param not in explicit}
    notes = [(event, fields) for event, fields in read.notes
             if fields.get("as_option", "").split(" ")[0] not in {_option_name(param) for param in explicit if param}]
    added = [part for param, value in options.items() for part in (_option_name(param), value)]
    return Rewritten([*kept, *added, *argv[index:]], Read(options, {p: read.sources[p] for p in options}, notes))


def _value_of(argv: list[str], index: int, entry: Torchrun, name: str, inline: str | None) -> str:
    if inline is not None:
        return inline
    if not entry.takes_value:
        return "1"
    if index + 1 >= len(argv):
        raise TorchrunFlagError(f"{name} needs a value (torchrun's meaning): give it after the flag")
    return argv[index + 1]


def _option_name(param: str) -> str:
    return "--" + param.replace("_", "-")


def env_values(env: Mapping[str, str]) -> dict[str, str]:
    """torchrun's own variables, PET_<DEST>, by dest (empty values count as unset)."""
    return {dest: env[ENV_PREFIX + dest.upper()] for dest, entry in TORCHRUN.items()
            if entry.env and env.get(ENV_PREFIX + dest.upper(), "").strip()}


def from_env(env: Mapping[str, str]) -> Read:
    """torchrun's PET_<DEST> variables as pai-launch options: those of the same meaning as they are, the others as
    `translate` reads them; each option's source names its variables."""
    values = env_values(env)
    name = lambda dest: ENV_PREFIX + dest.upper()  # noqa: E731 - how every value here is spelled
    read = translate({dest: value for dest, value in values.items() if TORCHRUN[dest].same is None}, name, values)
    same = {TORCHRUN[dest].same: (value, name(dest)) for dest, value in values.items() if TORCHRUN[dest].same}
    return Read({**{param: value for param, (value, _) in same.items()}, **read.options},
                {**{param: source for param, (_, source) in same.items()}, **read.sources}, read.notes)


def translate(given: Mapping[str, str], name: Callable[[str], str], beside: Mapping[str, str] = {}) -> Read:
    """torchrun values (dest -> value) that pai-launch has no option for, read by their rules in table order, with
    `beside` (the values of the options it has, by dest) for context; TorchrunFlagError for the first one refused."""
    context = {**beside, **given}
    options: dict[str, str] = {}
    sources: dict[str, str] = {}
    notes: list[tuple[str, dict]] = []
    for dest, entry in TORCHRUN.items():
        if dest not in given or entry.rule is None:
            continue
        output = entry.rule(Given(dest, given[dest], context, name))
        for param, value in output.options.items():
            if param not in options:
                options[param] = value
                sources[param] = name(dest)
            elif sources[param] != name(dest):
                sources[param] += ", " + name(dest)
        notes.extend(output.notes)
    return Read(options, sources, notes)
