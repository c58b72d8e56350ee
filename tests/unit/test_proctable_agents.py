"""The process table's part in replacing an agent: it forgets an agent that left and keeps the request it never
took, and starts a new agent for it only when the machine asks (ReplaceAgent) for that very generation."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from pai_launch.supervise.children.proctable import ProcessTable
from pai_launch.wire.protocol import GenerationRequest


def _request(generation: int) -> GenerationRequest:
    return GenerationRequest(generation=generation, nproc=2, python=sys.executable, args=("train.py",), env={},
                             log_dir=f"/tmp/g{generation}", grace=1.0, elastic_run_id="pai-test")


def _table(tmp_path, started: list) -> ProcessTable:
    table = ProcessTable(python=sys.executable, workdir=tmp_path, env={}, report=lambda event: None, log_dir=None)
    table._agent = SimpleNamespace(pid=41)
    table.start_agent = lambda request: (started.append(request) or (42, True))  # no process: what it was handed
    return table


def test_an_agent_that_left_holding_a_request_is_replaced_only_when_asked_and_only_once(tmp_path):
    started: list = []
    table = _table(tmp_path, started)

    assert table.agent_gone(41, _request(3)) and table.agent_pid is None
    assert started == []  # nothing is started until the machine decides
    assert table.replace_agent(3) == 42 and started == [_request(3)]
    assert table.replace_agent(3) is None and len(started) == 1


def test_no_new_agent_for_another_generation_or_for_an_agent_that_was_not_the_current_one(tmp_path):
    started: list = []
    table = _table(tmp_path, started)

    assert not table.agent_gone(7, _request(3))  # some older agent: not ours to decide on
    assert table.agent_pid == 41
    assert table.agent_gone(41, _request(3))
    assert table.replace_agent(4) is None and started == []
