"""The agent's reports as the loop hears them, in-process: an Agent that was made but not started (making one starts
no process) is fed typed reports and must turn each into the loop's event."""

from __future__ import annotations

import sys

from pai_launch.core.observations import AgentAnswered, AgentJoined, AgentReported, AgentStarted, AgentTookRequest
from pai_launch.supervise.children.agent_process import Agent
from pai_launch.wire.protocol import (
    AgentReady,
    ForkserverRestarted,
    GenerationRequest,
    GenerationResult,
    Joined,
    Pong,
    Retiring,
    StopRaised,
    WentCold,
)


def _agent(tmp_path, reports: list) -> Agent:
    agent = Agent(sys.executable, tmp_path, {}, reports.append)
    assert agent.pid is None and agent.popen is None  # nothing started
    return agent


def test_the_first_ready_is_the_agents_account_of_itself_and_later_changes_keep_it_current(tmp_path):
    reports: list = []
    agent = _agent(tmp_path, reports)

    agent._report_of(AgentReady(warm=True, preloaded=("torch",), forkserver=7, torch="2.13.0"))
    agent._report_of(AgentReady(warm=True, preloaded=("torch",), forkserver=7, torch="2.13.0"))  # ready again: no news
    agent._report_of(ForkserverRestarted(8, "it was killed"))
    agent._report_of(WentCold("the new forkserver failed its self-check"))

    assert [type(r) for r in reports] == [AgentStarted, AgentStarted, AgentStarted]
    first, restarted, cold = reports
    assert first.facts.forkserver == 7 and not first.restarted_why and not first.went_cold
    assert restarted.facts.forkserver == 8 and restarted.restarted_why == "it was killed"
    assert cold.went_cold and not cold.facts.warm and agent.facts == cold.facts


def test_a_request_waits_for_ready_and_results_joins_and_pongs_become_events(tmp_path):
    reports: list = []
    agent = _agent(tmp_path, reports)
    request = GenerationRequest(generation=2, nproc=2, python=sys.executable, args=("train.py",), env={},
                                log_dir=str(tmp_path / "g2"), grace=1.0, elastic_run_id="pai-test")

    agent.run(request)  # not ready yet: it waits
    agent._report_of(AgentReady(warm=False, why="--cold"))  # ready: the request goes out (to no pipe here)
    agent._report_of(Joined(2, 1))
    agent._report_of(Pong(1))
    agent._report_of(StopRaised())
    agent._report_of(Retiring("torch's launcher did not return"))
    agent._report_of(GenerationResult(2, log_dir=str(tmp_path / "g2")))

    kinds = [type(r) for r in reports]
    assert kinds == [AgentTookRequest, AgentTookRequest, AgentStarted, AgentJoined, AgentAnswered, AgentReported]
    assert [r.taken for r in reports[:2]] == [False, True]
    assert (reports[3].generation, reports[3].failures) == (2, 1)
    assert reports[-1].result == GenerationResult(2, log_dir=str(tmp_path / "g2")) and reports[-1].returncode is None
    assert agent.stop_raised.is_set() and agent._retiring == "torch's launcher did not return"


def test_every_report_the_agent_can_send_has_its_handler():
    """A report type without one would be dropped without a word."""
    from pai_launch.supervise.children import agent_process
    from pai_launch.wire.protocol import REPORTS

    assert set(agent_process._HEARD) == set(REPORTS.types().values())
