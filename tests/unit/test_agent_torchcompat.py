"""agent_torchcompat: the agent's LaunchConfig keywords fitted to the shape of each torch's launcher."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import pytest

from pai_launch.agent import torchcompat

WANTED = dict(min_nodes=1, max_nodes=1, nproc_per_node=2, run_id="r", rdzv_backend="c10d", rdzv_endpoint="localhost:0",
              max_restarts=0, monitor_interval=0.1, logs_specs=None, shutdown_timeout=5, start_method="spawn")


@dataclass
class LaunchConfig24:
    """torch 2.4-2.10's fields (no shutdown_timeout, no signals_to_handle)."""

    min_nodes: int
    max_nodes: int
    nproc_per_node: int
    logs_specs: Optional[object] = None
    run_id: str = ""
    role: str = "default_role"
    rdzv_endpoint: str = ""
    rdzv_backend: str = "etcd"
    rdzv_configs: dict = dataclasses.field(default_factory=dict)
    rdzv_timeout: int = -1
    max_restarts: int = 3
    monitor_interval: float = 0.1
    start_method: str = "spawn"
    log_line_prefix_template: Optional[str] = None
    metrics_cfg: dict = dataclasses.field(default_factory=dict)
    local_addr: Optional[str] = None


@dataclass
class LaunchConfig213(LaunchConfig24):
    """torch 2.13's: shutdown_timeout and signals_to_handle added."""

    signals_to_handle: str = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"
    shutdown_timeout: Optional[int] = None


class LaunchConfigPlain:
    """A launcher config that is not a dataclass: its constructor's keywords count."""

    def __init__(self, min_nodes, max_nodes, nproc_per_node, *, run_id="", rdzv_backend="", rdzv_endpoint="",
                 max_restarts=0, monitor_interval=0.1, start_method="spawn", logs_specs=None, local_addr=None):
        pass


class LaunchConfigAnything:
    def __init__(self, **kwargs):
        pass


def test_an_older_torch_gets_every_keyword_but_the_two_it_lacks():
    fitted = torchcompat.config_kwargs(LaunchConfig24, {**WANTED, "signals_to_handle": "SIGTERM"})
    assert fitted.missing == ("shutdown_timeout", "signals_to_handle")
    assert not fitted.has_shutdown_timeout
    assert set(fitted.kwargs) == set(WANTED) - {"shutdown_timeout"}
    LaunchConfig24(**fitted.kwargs)  # builds


def test_a_recent_torch_gets_everything():
    fitted = torchcompat.config_kwargs(LaunchConfig213, WANTED)
    assert fitted.missing == () and fitted.has_shutdown_timeout
    assert fitted.kwargs == WANTED
    assert LaunchConfig213(**fitted.kwargs).shutdown_timeout == 5


def test_a_constructor_signature_counts_where_there_are_no_dataclass_fields():
    fitted = torchcompat.config_kwargs(LaunchConfigPlain, {**WANTED, "local_addr": "10.0.0.1"})
    assert fitted.missing == ("shutdown_timeout",)
    LaunchConfigPlain(**fitted.kwargs)
    assert torchcompat.config_kwargs(LaunchConfigAnything, WANTED).kwargs == WANTED


def test_a_launcher_without_a_required_field_is_refused_in_one_line():
    @dataclass
    class TooOld:
        min_nodes: int
        max_nodes: int
        nproc_per_node: int

    with pytest.raises(torchcompat.UnsupportedTorch, match=r"takes no logs_specs.*torch 2.4 or newer") as caught:
        torchcompat.config_kwargs(TooOld, WANTED)
    assert "\n" not in str(caught.value)


def test_a_keyword_nobody_knows_is_a_bug_here_not_a_silent_drop():
    with pytest.raises(torchcompat.UnsupportedTorch, match="no shutdown_grace"):
        torchcompat.config_kwargs(LaunchConfig24, {**WANTED, "shutdown_grace": 3})


def test_the_installed_torchs_logs_specs_write_under_the_folder(tmp_path):
    specs = torchcompat.logs_specs(str(tmp_path))
    assert specs.root_log_dir == str(tmp_path)


def test_logs_specs_without_the_keywords_the_agent_passes_are_refused(monkeypatch, tmp_path):
    from torch.distributed.elastic import multiprocessing

    class OldLogsSpecs:
        def __init__(self, log_dir=None):
            pass

    monkeypatch.setattr(multiprocessing, "DefaultLogsSpecs", OldLogsSpecs)
    with pytest.raises(torchcompat.UnsupportedTorch, match="DefaultLogsSpecs takes no redirects, tee"):
        torchcompat.logs_specs(str(tmp_path))


def test_signals_to_handle_is_none_where_the_config_has_no_such_field():
    assert torchcompat.signals_to_handle(LaunchConfig24(1, 1, 1)) is None
    assert torchcompat.signals_to_handle(LaunchConfig213(1, 1, 1)) == "SIGTERM,SIGINT,SIGHUP,SIGQUIT"


def test_the_installed_torch_builds_a_config_from_the_agents_keywords():
    from torch.distributed.launcher.api import LaunchConfig

    config = torchcompat.launch_config(dict(WANTED))
    assert isinstance(config, LaunchConfig) and config.nproc_per_node == 2
