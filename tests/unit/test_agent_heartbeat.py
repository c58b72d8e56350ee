"""The agent's side of its heartbeat and of a cancelled generation: the request reader answers a ping at once (while
the main thread is busy), records a cancel, and a cancelled generation starts no worker. Real pipes and threads."""

from __future__ import annotations

import os
import queue
import threading

import pytest

from pai_launch.agent import generation as agent_generation
from pai_launch.agent import main as agent
from pai_launch.agent.control import AgentControl
from pai_launch.wire import codec
from pai_launch.wire.protocol import REPORTS, Cancel, GenerationRequest, GenerationResult, Ping, Pong

pytestmark = pytest.mark.timeout(30)


def _request(generation: int, tmp_path) -> GenerationRequest:
    return GenerationRequest(generation=generation, nproc=2, python="/usr/bin/python3", args=("-u", "train.py"),
                             env={}, log_dir=str(tmp_path / f"generation-{generation}"), grace=1.0,
                             elastic_run_id="pai-test")


def test_the_request_reader_answers_pings_at_once_and_queues_only_requests(tmp_path):
    request_r, request_w = os.pipe()
    result_r, result_w = os.pipe()
    requests: queue.Queue = queue.Queue()
    control = AgentControl()
    reader = threading.Thread(target=agent._read_requests, args=(request_r, requests, agent.Output(result_w), control),
                              daemon=True)
    reader.start()
    os.write(request_w, b"".join(codec.encode(m) for m in (Ping(1), _request(4, tmp_path), Ping(2), Cancel(41))))
    answers = b""
    while answers.count(b"\n") < 2:
        answers += os.read(result_r, 4096)
    assert [REPORTS.decode(line) for line in answers.splitlines()] == [Pong(1), Pong(2)]
    assert requests.get(timeout=5) == _request(4, tmp_path)
    os.close(request_w)
    assert requests.get(timeout=5) is None and requests.empty()  # EOF; the pings and the cancel queued nothing
    reader.join(5)
    assert control.cancelled(41) and not control.cancelled(4)
    for fd in (request_r, result_r, result_w):
        os.close(fd)


class _Out:
    def __init__(self) -> None:
        self.results: list[GenerationResult] = []

    def result(self, result: GenerationResult) -> None:
        self.results.append(result)


def test_a_cancelled_generation_reports_cancelled_and_starts_nothing(tmp_path):
    control = AgentControl()
    control.cancel(57)
    out = _Out()
    agent_generation.run_generation(_request(57, tmp_path), out, control)
    assert out.results == [GenerationResult(57, log_dir=str(tmp_path / "generation-57"), cancelled=True)]
    assert not (tmp_path / "generation-57").exists()  # no launcher ran: it would have made its log folder


def test_a_result_line_keeps_its_fault_and_cancelled_flags():
    result = GenerationResult(3, fault="the warm workers' forkserver (pid 9) died during generation 3", cancelled=False)
    assert REPORTS.decode(codec.encode(result)) == result
    assert REPORTS.decode(codec.encode(GenerationResult(4, cancelled=True))).cancelled


@pytest.mark.proc  # starts processes
def test_a_dead_forkserver_is_named_even_before_it_is_reaped():
    import subprocess
    import sys
    from types import SimpleNamespace

    from tests.helpers import wait_until

    server = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_until(lambda: not agent_generation.procs.is_running(server.pid), 10, message="the stand-in server to exit")
        fault = agent_generation.forkserver_fault(SimpleNamespace(server_pid=server.pid), 3)  # a zombie: not reaped
        assert fault.startswith(f"the warm workers' forkserver (pid {server.pid}) died during generation 3")
    finally:
        server.wait()
    assert agent_generation.forkserver_fault(None, 3) is None  # cold workers: no forkserver
    assert agent_generation.forkserver_fault(SimpleNamespace(server_pid=os.getpid()), 3) is None
