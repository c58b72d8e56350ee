"""agent.teardown: the run's grace on torch's own stop of a failed generation's survivors, whatever torch's fixed
30 s default: the decisions on the shape of each torch, the survivors' stop on stand-in processes, and the patch on
the installed torch in a fresh interpreter."""

from __future__ import annotations

import inspect
import signal
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from pai_launch.agent import teardown

pytestmark = pytest.mark.timeout(60)


class Context:
    """PContext's close, as on every supported torch."""

    def close(self, death_sig=None, timeout: int = 30):
        """The timeout it was given."""
        return timeout


class Agent24:
    """torch 2.4-2.12's LocalElasticAgent: _shutdown takes no timeout and passes none to close."""

    def _shutdown(self, death_sig=signal.SIGTERM, is_restart: bool = False):
        pass


class Agent213:
    """torch 2.13-2.15's: _shutdown(death_sig, timeout=30) passes its timeout on to close."""

    def _shutdown(self, death_sig=signal.SIGTERM, timeout: int = 30):
        return timeout


def test_the_grace_goes_to_close_everywhere_and_to_shutdown_where_it_takes_a_timeout():
    assert teardown.grace_targets(Context, Agent24) == ((Context, "close"),)
    assert teardown.grace_targets(Context, Agent213) == ((Context, "close"), (Agent213, "_shutdown"))


@pytest.mark.parametrize("args, kwargs, expected", [
    ((), {}, {"timeout": 45}),  # _poll's self.close(), _stop_workers' self._shutdown()
    ((signal.SIGTERM,), {}, {"timeout": 45}),  # an older _shutdown's close(death_sig)
    ((signal.SIGTERM, 12), {}, {}),  # torch's own explicit timeout (shutdown_timeout) is kept
    ((), {"timeout": 0}, {"timeout": 0}),
    ((signal.SIGTERM, 1, 2), {}, {}),  # not a call close takes: left for torch to refuse
], ids=["none", "signal-only", "positional", "keyword", "too-many"])
def test_only_a_call_without_a_timeout_gets_the_grace(args, kwargs, expected):
    assert teardown.with_timeout(inspect.signature(Context.close), (Context(), *args), kwargs, 45) == expected


def test_a_wrapped_method_reads_the_grace_at_each_call_and_is_wrapped_once(monkeypatch):
    class Fresh(Context):
        close = Context.close

    monkeypatch.setattr(teardown, "_grace", [7])
    teardown.default_timeout(Fresh, "close")
    wrapped = Fresh.close
    teardown.default_timeout(Fresh, "close")
    assert Fresh.close is wrapped and wrapped.__doc__ == "The timeout it was given."
    teardown._grace[0] = 4
    assert (Fresh().close(), Fresh().close(signal.SIGTERM, 12), Context().close()) == (4, 12, 30)


@pytest.mark.parametrize("exitcodes, expected", [
    ({0: None, 1: None}, None),  # all running
    ({0: None, 1: 0}, None),  # one done, cleanly
    ({0: None, 1: 1}, 1),
    ({0: -15, 1: 1, 2: None}, 0),  # torch's join blames the lowest failed rank
])
def test_the_failure_torch_would_blame(exitcodes, expected):
    assert teardown.first_failure(exitcodes) == expected


class Process:
    """A stand-in for a multiprocessing.Process: exits at SIGTERM unless `stubborn`, always at SIGKILL."""

    def __init__(self, index: int, exitcode: int | None = None, stubborn: bool = False) -> None:
        self.sentinel, self.exitcode, self.stubborn, self.pid = 100 + index, exitcode, stubborn, 1000 + index
        self.calls: list[tuple] = []

    def is_alive(self) -> bool:
        return self.exitcode is None

    def terminate(self) -> None:
        self.calls.append(("terminate",))
        if not self.stubborn:
            self.exitcode = -signal.SIGTERM

    def kill(self) -> None:
        self.calls.append(("kill",))
        self.exitcode = -signal.SIGKILL

    def join(self, timeout=None) -> None:
        self.calls.append(("join", timeout))


class ProcessContext:
    def __init__(self, *processes: Process) -> None:
        self.processes = list(processes)
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}


def test_no_failure_leaves_the_processes_and_torchs_join_alone():
    context = ProcessContext(Process(0), Process(1, exitcode=0))
    sentinels = dict(context.sentinels)
    teardown.stop_survivors(context, 45)
    assert context.sentinels == sentinels and all(p.calls == [] for p in context.processes)


def test_a_failure_stops_the_survivors_with_the_grace_and_leaves_torch_the_failed_rank_to_blame():
    survivor, stubborn, failed = Process(0), Process(1, stubborn=True), Process(2, exitcode=1)
    context = ProcessContext(survivor, stubborn, failed)
    teardown.stop_survivors(context, 45)
    assert survivor.calls[0] == ("terminate",) and ("kill",) not in survivor.calls
    assert [c[0] for c in stubborn.calls] == ["terminate", "join", "kill", "join"]
    assert all(0 <= c[1] <= 45 for p in (survivor, stubborn) for c in p.calls if c[0] == "join")
    assert failed.calls == []  # already gone
    assert context.sentinels == {failed.sentinel: 2}  # not rank 0's SIGTERM exit: it is not the cause


def test_the_survivors_stop_survivors_stops_are_noted_as_torchs_and_the_failed_rank_is_not(monkeypatch):
    monkeypatch.setattr(teardown, "_stopping", set())
    context = ProcessContext(Process(0), Process(1, exitcode=0), Process(2, exitcode=1))
    teardown.stop_survivors(context, 45)
    assert [teardown.stopped_by_torch(pid) for pid in (1000, 1001, 1002)] == [True, False, False]


def test_survivors_pai_launch_has_signalled_are_waited_for_and_killed_after_the_grace_never_signalled_again(
        monkeypatch):
    monkeypatch.setattr(teardown, "_signalled", [lambda: True])
    quick, stubborn, failed = Process(0), Process(1, stubborn=True), Process(2, exitcode=-signal.SIGTERM)
    quick.join = lambda timeout=None: setattr(quick, "exitcode", -signal.SIGTERM)  # exits of its own stop signal
    context = ProcessContext(quick, stubborn, failed)
    teardown.stop_survivors(context, 45)
    assert ("terminate",) not in quick.calls + stubborn.calls
    assert [c[0] for c in stubborn.calls] == ["join", "kill", "join"]
    assert context.sentinels == {failed.sentinel: 2}


class _Waited:
    """A cold worker's Popen: ends when waited on (quick) or never (stubborn)."""

    def __init__(self, pid: int, stubborn: bool = False) -> None:
        self.pid, self.stubborn, self.returncode, self.waits = pid, stubborn, None, []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        if self.stubborn:
            raise subprocess.TimeoutExpired("worker", timeout)
        self.returncode = -signal.SIGTERM
        return self.returncode


@pytest.mark.parametrize("signalled", [False, True])
def test_a_close_once_pai_launch_has_signalled_the_workers_waits_for_them_then_sends_only_sigkill(monkeypatch,
                                                                                                 signalled):
    monkeypatch.setattr(teardown, "_signalled", [lambda: signalled])
    monkeypatch.setattr(teardown, "_grace", [9.0])
    closed: list[tuple] = []

    class Fresh:
        def __init__(self) -> None:
            self.subprocess_handlers = {0: SimpleNamespace(proc=_Waited(30)),
                                        1: SimpleNamespace(proc=_Waited(31, stubborn=True))}

        def close(self, death_sig=None, timeout: int = 30):
            closed.append((death_sig, timeout))

    teardown.default_timeout(Fresh, "close")
    teardown._once_signalled(Fresh)
    teardown._once_signalled(Fresh)  # wrapped once
    fresh = Fresh()
    fresh.close()
    fresh.close(signal.SIGTERM, 5)
    waits = [handler.proc.waits for handler in fresh.subprocess_handlers.values()]
    if signalled:
        assert closed == [(signal.SIGKILL, 9.0), (signal.SIGKILL, 5)]
        assert all(0 <= waited <= 9.0 for ranks in waits for waited in ranks) and waits[1]
    else:
        assert closed == [(None, 9.0), (signal.SIGTERM, 5)] and waits == [[], []]


def _popen(pid: int, returncode: int | None) -> SimpleNamespace:
    return SimpleNamespace(proc=SimpleNamespace(pid=pid, returncode=returncode))


def test_the_workers_torch_is_about_to_stop_are_those_it_has_not_seen_end():
    cold = SimpleNamespace(subprocess_handlers={0: _popen(10, None), 1: _popen(11, 1), 2: _popen(12, None)})
    warm = SimpleNamespace(_pc=ProcessContext(Process(0), Process(1, exitcode=-signal.SIGSEGV), Process(2)))
    assert teardown.running_workers(cold) == {10, 12}
    assert teardown.running_workers(warm) == {1000, 1002}
    assert teardown.running_workers(SimpleNamespace()) == set()  # a context of neither kind: nothing noted


def test_a_close_notes_the_running_workers_before_it_stops_any(monkeypatch):
    monkeypatch.setattr(teardown, "_stopping", set())
    noted_when_closing: list[bool] = []

    class Fresh:
        def __init__(self) -> None:
            self.subprocess_handlers = {0: _popen(20, None), 1: _popen(21, 3)}

        def close(self, death_sig=None, timeout: int = 30):
            noted_when_closing.append(teardown.stopped_by_torch(20))

    teardown.default_timeout(Fresh, "close", before=teardown._note_stopping)
    Fresh().close()
    assert noted_when_closing == [True] and not teardown.stopped_by_torch(21)


@pytest.mark.proc  # starts processes
def test_apply_reaches_close_from_poll_and_from_stop_workers_in_a_real_process():
    """In a fresh interpreter (the patch is process-wide), on the installed torch: PContext.close without a timeout
    (SubprocessContext._poll's) and LocalElasticAgent._stop_workers (a failed generation's) give a stopping worker
    the grace; an explicit timeout (shutdown_timeout's) is kept; a second call only changes the value; the warm
    workers' context joins only after the survivors' stop."""
    probe = textwrap.dedent("""
        import signal
        from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
        from torch.distributed.elastic.multiprocessing import api
        from pai_launch.agent import teardown
        seen = []
        class Probe(api.PContext):
            def __init__(self):
                self._tail_logs, self.filtered_stdout, self.filtered_stderr = [], None, None
                self._stdout_tail = self._stderr_tail = None  # older torches' close reads these
            def _start(self): pass
            def _poll(self): return None
            def pids(self): return {}
            def _close(self, death_sig, timeout=30): seen.append(timeout)
        teardown.apply(7)
        teardown.apply(4)
        Probe().close()
        Probe().close(signal.SIGTERM, 12)
        agent = LocalElasticAgent.__new__(LocalElasticAgent)
        agent._worker_watchdog = agent._health_check_server = agent._rdzv_handler = None
        agent._pcontext = Probe()
        agent._stop_workers(None)
        print(*seen, api.MultiprocessContext._poll._pai_launch_grace)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["4", "12", "4", "True"]
