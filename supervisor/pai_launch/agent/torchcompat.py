"""What the installed torch's elastic launcher accepts, so one agent runs on every torch from 2.4 on.

torch's launcher gained options over releases: `LaunchConfig.shutdown_timeout` (how long a stopping worker gets
before SIGKILL) and `LaunchConfig.signals_to_handle` exist only in recent releases. The agent asks for what it wants
and this module keeps what the installed class takes, by its dataclass fields or its constructor's signature (never
by version number, which says nothing of backports or nightlies), and makes up for what it lacks (DefaultLogsSpecs,
the other class the agent builds, takes the same keywords on every supported torch and is only checked):

- no `shutdown_timeout`: torch stops its workers with a fixed 30 s everywhere. Even with it, a failed generation's
  survivors get torch's 30 s; agent.teardown gives them the grace on every torch, and so stands in for it here.
- no `signals_to_handle`: torch installs its handler on SIGTERM, SIGINT, SIGHUP and SIGQUIT and tells its workers
  nothing; warm workers then see no TORCHELASTIC_SIGNALS_TO_HANDLE either, as cold ones don't.

The decisions (`accepted`, `config_kwargs`) are pure and take the class, so tests hand them the shape of each torch.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass

#: The LaunchConfig fields every supported torch has; without one of them the agent cannot launch at all.
REQUIRED = frozenset({"min_nodes", "max_nodes", "nproc_per_node", "run_id", "rdzv_backend", "rdzv_endpoint",
                      "max_restarts", "monitor_interval", "start_method", "logs_specs"})
#: Fields the agent uses when this torch has them, each with what stands in for it otherwise.
OPTIONAL = {"shutdown_timeout": "agent.teardown's grace on torch's own stops of the workers",
            "signals_to_handle": "torch's own signal list (SIGTERM, SIGINT, SIGHUP, SIGQUIT), not passed to workers",
            "local_addr": "the address torch picks"}


class UnsupportedTorch(RuntimeError):
    """The installed torch's launcher lacks something the agent cannot do without."""


def accepted(cls) -> frozenset[str]:
    """The keyword names `cls(...)` takes: its dataclass fields, else its constructor's keyword parameters."""
    if dataclasses.is_dataclass(cls):
        return frozenset(field.name for field in dataclasses.fields(cls) if field.init)
    parameters = inspect.signature(cls).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return frozenset(p.name for p in parameters) | {"*"}
    return frozenset(p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


@dataclass(frozen=True)
class Fitted:
    """The keywords to build a LaunchConfig with on this torch, and the ones it lacks (with their stand-ins)."""

    kwargs: dict
    missing: tuple[str, ...]

    @property
    def has_shutdown_timeout(self) -> bool:
        return "shutdown_timeout" not in self.missing


def config_kwargs(cls, wanted: dict) -> Fitted:
    """Keep the keywords of `wanted` that `cls` accepts; UnsupportedTorch when a required one is not accepted."""
    names = accepted(cls)
    if "*" in names:
        return Fitted(dict(wanted), ())
    lacking = sorted(name for name in wanted if name not in names and name in REQUIRED)
    if lacking:
        raise UnsupportedTorch(f"this torch's LaunchConfig takes no {', '.join(lacking)}: pai-launch needs torch 2.4 "
                               "or "
                               "newer (pip install 'torch>=2.4')")
    unknown = sorted(name for name in wanted if name not in names and name not in OPTIONAL)
    if unknown:
        raise UnsupportedTorch(f"this torch's LaunchConfig takes no {', '.join(unknown)}")
    missing = tuple(name for name in wanted if name not in names)
    return Fitted({name: value for name, value in wanted.items() if name in names}, missing)


def launch_config(wanted: dict):
    """torch's LaunchConfig built from `wanted`, less what this torch does not take (made up for as the module says)."""
    from torch.distributed.launcher.api import LaunchConfig

    fitted = config_kwargs(LaunchConfig, wanted)
    return LaunchConfig(**fitted.kwargs)


def logs_specs(log_dir: str):
    """torch's DefaultLogsSpecs writing every rank's stdout and stderr to files under `log_dir`, printing nothing."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std

    names = accepted(DefaultLogsSpecs)
    lacking = sorted({"log_dir", "redirects", "tee"} - names) if "*" not in names else []
    if lacking:
        raise UnsupportedTorch(f"this torch's DefaultLogsSpecs takes no {', '.join(lacking)}: pai-launch needs torch "
                               "2.4 "
                               "or newer (pip install 'torch>=2.4')")
    return DefaultLogsSpecs(log_dir=log_dir, redirects=Std.ALL, tee=Std.NONE)


def signals_to_handle(config) -> str | None:
    """The signal list torch's launcher hands its workers (TORCHELASTIC_SIGNALS_TO_HANDLE); None where it hands none."""
    return getattr(config, "signals_to_handle", None)
