"""The environment a generation's workers start from, worked out as data and held in the agent's own only while torch
starts them.

Workers inherit the agent's environment: torch's spawn copies it into every cold worker, and warmpool.worker_spec
copies it for every warm one. So a generation's variables (the request's, a multi-node join's generation number,
torch's signal list) must be in the agent's environment while torch's launcher runs, and only then: once it returns
the agent's environment is put back exactly as it was, torch's own additions included, so a later generation, or a
forkserver restarted between generations, never sees an earlier one's variables.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager

from pai_launch.wire.protocol import GenerationRequest

GENERATION_ENV = "PAI_LAUNCH_GENERATION"
#: What torch's launcher (where it has the option) sets in its own environment before it starts workers.
SIGNALS_ENV = "TORCHELASTIC_SIGNALS_TO_HANDLE"

#: Variable -> its value while torch runs; None: absent then.
Changes = dict[str, str | None]


def changes(request: GenerationRequest, generation: int, *, warm: bool, signals: str | None) -> Changes:
    """What generation `generation` puts in the agent's environment for its workers.

    A multi-node job's generation number is the one its store handed out, which may be past the request's. Warm
    workers' environment is copied before torch's launcher sets its signal list, so it is set here first (`signals`:
    the launcher's; None where this torch has no such option, and then warm workers get none)."""
    env: Changes = dict(request.env)
    if request.nodes is not None:
        env[GENERATION_ENV] = str(generation)
    if warm:
        env[SIGNALS_ENV] = signals
    return env


def apply(environ: MutableMapping[str, str], wanted: Changes) -> None:
    for key, value in wanted.items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value


def undo(before: Mapping[str, str], now: Mapping[str, str]) -> Changes:
    """What takes `now` back to `before`: only the variables that differ, so nothing unchanged is ever unset."""
    back: Changes = {key: None for key in now if key not in before}
    back.update((key, value) for key, value in before.items() if now.get(key) != value)
    return back


@contextmanager
def applied(wanted: Changes, environ: MutableMapping[str, str] = os.environ) -> Iterator[None]:
    """`wanted` in `environ` for the block; afterwards `environ` exactly as it was before, whatever the block set."""
    before = dict(environ)
    apply(environ, wanted)
    try:
        yield
    finally:
        apply(environ, undo(before, environ))
