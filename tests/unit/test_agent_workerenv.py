"""agent.workerenv: a generation's variables, worked out as data, held in the agent's environment only while torch
runs, and the agent's environment put back exactly afterwards."""

from __future__ import annotations

import os
from collections.abc import Iterator, MutableMapping
from types import SimpleNamespace

import pytest

from pai_launch.agent import torchcompat, workerenv
from pai_launch.agent.workerenv import GENERATION_ENV, SIGNALS_ENV
from pai_launch.wire.protocol import GenerationRequest, NodeRequest

RUN_ENV = {"PAI_LAUNCH_RUN_ID": "run", GENERATION_ENV: "3", "OMP_NUM_THREADS": "1"}
NODES = NodeRequest(node_rank=1, min_nodes=2, max_nodes=2, host="node0", port=29500, rdzv_timeout=60.0, job_id="job",
                    save_dir="/save", fs_settle=5.0)


def _request(env: dict[str, str] = RUN_ENV, nodes: NodeRequest | None = None) -> GenerationRequest:
    return GenerationRequest(generation=3, nproc=2, python="python3", args=("-u", "train.py"), env=dict(env),
                             log_dir="/logs/generation-3", grace=5.0, elastic_run_id="pai-run-3", nodes=nodes)


class _Recording(MutableMapping):
    """An environment that remembers every key written or removed."""

    def __init__(self, data: dict[str, str]) -> None:
        self.data, self.touched = dict(data), []

    def __getitem__(self, key: str) -> str:
        return self.data[key]

    def __setitem__(self, key: str, value: str) -> None:
        self.touched.append(key)
        self.data[key] = value

    def __delitem__(self, key: str) -> None:
        self.touched.append(key)
        del self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def test_a_single_node_cold_generation_sets_the_requests_variables_only():
    assert workerenv.changes(_request(), 3, warm=False, signals="SIGTERM") == RUN_ENV


def test_a_multi_node_generation_carries_the_number_its_store_handed_out():
    changes = workerenv.changes(_request(nodes=NODES), 5, warm=False, signals=None)
    assert changes == {**RUN_ENV, GENERATION_ENV: "5"}


def test_warm_workers_get_the_signal_list_torchs_launcher_would_set_for_cold_ones():
    changes = workerenv.changes(_request(), 3, warm=True, signals="SIGTERM,SIGINT,SIGHUP,SIGQUIT")
    assert changes == {**RUN_ENV, SIGNALS_ENV: "SIGTERM,SIGINT,SIGHUP,SIGQUIT"}


def test_where_torch_has_no_signal_option_warm_workers_get_no_signal_list_and_the_agents_comes_back_after():
    config = SimpleNamespace(min_nodes=1)  # a torch 2.4-2.10 LaunchConfig: no signals_to_handle
    changes = workerenv.changes(_request(), 3, warm=True, signals=torchcompat.signals_to_handle(config))
    assert changes == {**RUN_ENV, SIGNALS_ENV: None}
    environ = {"HOME": "/home/u", SIGNALS_ENV: "SIGTERM"}
    with workerenv.applied(changes, environ):
        assert SIGNALS_ENV not in environ and environ["OMP_NUM_THREADS"] == "1"
    assert environ == {"HOME": "/home/u", SIGNALS_ENV: "SIGTERM"}


def test_the_agents_environment_is_restored_exactly_whatever_the_block_set():
    before = {"HOME": "/home/u", "OMP_NUM_THREADS": "8", "STALE": "x"}
    environ = dict(before)
    with workerenv.applied({"OMP_NUM_THREADS": "1", GENERATION_ENV: "2", "STALE": None}, environ):
        assert environ == {"HOME": "/home/u", "OMP_NUM_THREADS": "1", GENERATION_ENV: "2"}
        environ[SIGNALS_ENV] = "SIGTERM"  # what torch's launcher sets in its own environment
        del environ["HOME"]
    assert environ == before


def test_the_environment_is_restored_when_torch_raises():
    environ = {"HOME": "/home/u"}
    with pytest.raises(RuntimeError), workerenv.applied({GENERATION_ENV: "1"}, environ):
        raise RuntimeError("rendezvous failed")
    assert environ == {"HOME": "/home/u"}


def test_a_later_generation_never_sees_an_earlier_ones_variables():
    environ = {"HOME": "/home/u"}
    with workerenv.applied(workerenv.changes(_request({"CUDA_VISIBLE_DEVICES": "0,1"}), 1, warm=True,
                                             signals="SIGTERM"),
                           environ):
        pass
    with workerenv.applied(workerenv.changes(_request({GENERATION_ENV: "2"}), 2, warm=False, signals=None), environ):
        assert environ == {"HOME": "/home/u", GENERATION_ENV: "2"}


def test_restoring_touches_only_the_variables_that_changed():
    environ = _Recording({"HOME": "/home/u", "PATH": "/bin", "OMP_NUM_THREADS": "8"})
    with workerenv.applied({"OMP_NUM_THREADS": "1", GENERATION_ENV: "1"}, environ):
        environ.touched.clear()
    assert sorted(environ.touched) == sorted([GENERATION_ENV, "OMP_NUM_THREADS"])
    assert environ.data == {"HOME": "/home/u", "PATH": "/bin", "OMP_NUM_THREADS": "8"}


def test_undo_names_what_was_added_removed_and_changed():
    assert workerenv.undo({"A": "1", "B": "2", "C": "3"}, {"A": "1", "B": "9",
                                                           "D": "4"}) == {"B": "2", "C": "3", "D": None}


def test_the_process_environment_is_the_default_and_comes_back(monkeypatch):
    monkeypatch.delenv(GENERATION_ENV, raising=False)
    before = dict(os.environ)
    with workerenv.applied({GENERATION_ENV: "7"}):
        assert os.environ[GENERATION_ENV] == "7"
    assert dict(os.environ) == before
