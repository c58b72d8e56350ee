"""The process table's part in replacing an agent: it forgets an agent that left and keeps the request it never
took, and starts a new agent for it only when the machine asks (ReplaceAgent) for that very generation; and what it
learns of its children's ends from the threads' reports, before the translator sees them."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from pai_launch.core.observations import AgentAnswered, AgentReported, ProcessExited, Role, SignalReceived
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


def test_the_table_learns_its_childrens_ends_and_sets_aside_reports_of_agents_it_no_longer_runs(tmp_path):
    table = _table(tmp_path, [])
    table._agent_busy = True
    table._plain = SimpleNamespace(pid=40)

    assert table.learn(ProcessExited(Role.INIT, 0, "", 1.0)) and table._plain is None
    assert not table.learn(AgentAnswered(7, 1.0))  # an older agent's heartbeat: nothing to decide
    assert table.learn(AgentAnswered(41, 1.0))
    assert not table.learn(AgentReported(7, None, -9, 2.0)) and table.agent_pid == 41
    assert table.learn(AgentReported(41, None, -9, 2.0)) and table.agent_pid is None  # died with its generation
    assert not table.learn(AgentReported(41, None, -9, 2.0)), "an end is learned once"
    assert table.learn(SignalReceived(15, 3.0)), "anything else is not the table's to judge"
