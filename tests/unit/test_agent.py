"""The agent's account of a failed generation: which exit is the root cause, and each failed rank's log tail.

When one rank dies, torch stops the others with SIGTERM, then SIGKILL: those collateral exits (-15, -9, or
143/137 from a handler that exits 128+N) must never be reported ahead of the real failure. The log tails
come from torch's per-rank files, LOG_DIR/<run>/attempt_0/<local_rank>/{stderr,stdout}.log.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pai_launch.agent import teardown
from pai_launch.agent.generation import _log_tail, failures_from_exits, failures_from_torch
from pai_launch.agent.workers import WorkerExit

COLLATERAL = [-signal.SIGTERM, -signal.SIGKILL, 128 + signal.SIGTERM, 128 + signal.SIGKILL]
RUN = "pai-abc123_x7y8z9"


def write_log(log_dir: Path, rank: int, stream: str, text: str, *, run: str = RUN, attempt: int = 0) -> Path:
    path = log_dir / run / f"attempt_{attempt}" / str(rank) / f"{stream}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def exit_(rank: int, returncode: int, at: float) -> WorkerExit:
    return WorkerExit(pid=1000 + rank, rank=rank, returncode=returncode, at=at)


def ranks_and_codes(failures) -> list[tuple[int, int]]:
    return [(failure.rank, failure.returncode) for failure in failures]


# --- root-cause ordering --------------------------------------------------------------------------
def test_every_worker_exiting_0_is_no_failure(tmp_path):
    assert failures_from_exits([exit_(0, 0, 1.0), exit_(1, 0, 1.1)], str(tmp_path)) == ()


def test_the_earliest_exit_comes_first_and_zero_exits_are_left_out(tmp_path):
    exits = [exit_(0, 1, at=12.0), exit_(1, 3, at=10.0), exit_(2, 0, at=9.0), exit_(3, 5, at=11.0)]

    failures = failures_from_exits(exits, str(tmp_path))

    assert ranks_and_codes(failures) == [(1, 3), (3, 5), (0, 1)]


@pytest.mark.parametrize("collateral", COLLATERAL, ids=lambda code: f"collateral{code}")
def test_a_real_exit_code_comes_before_torchs_collateral_stop_at_the_same_moment(tmp_path, collateral):
    # Rank 0 is the lower rank and was seen at the same instant, but it only died of torch's stop.
    exits = [exit_(0, collateral, at=5.0), exit_(1, 7, at=5.0)]

    failures = failures_from_exits(exits, str(tmp_path))

    assert ranks_and_codes(failures) == [(1, 7), (0, collateral)]


@pytest.mark.parametrize("real", [1, 7, -signal.SIGSEGV, -signal.SIGABRT, 128 + signal.SIGINT],
                         ids=["exit1", "exit7", "SIGSEGV", "SIGABRT", "exit130"])
def test_only_sigterm_and_sigkill_count_as_collateral(tmp_path, real):
    exits = [exit_(0, -signal.SIGKILL, at=2.0), exit_(1, -signal.SIGTERM, at=2.0), exit_(2, real, at=2.0)]

    failures = failures_from_exits(exits, str(tmp_path))

    assert ranks_and_codes(failures)[0] == (2, real)


def test_an_earlier_exit_still_comes_first_even_when_it_looks_collateral(tmp_path):
    # The elastic agent sends no SIGKILL before the first failure: an earlier -9 (the OOM killer) is the root cause.
    exits = [exit_(1, 7, at=3.0), exit_(0, -signal.SIGKILL, at=1.0)]

    assert ranks_and_codes(failures_from_exits(exits, str(tmp_path))) == [(0, -signal.SIGKILL), (1, 7)]


def test_failures_at_the_same_moment_of_the_same_kind_go_by_rank(tmp_path):
    exits = [exit_(3, 2, at=4.0), exit_(1, 9, at=4.0), exit_(2, -signal.SIGTERM, at=4.0),
             exit_(0, -signal.SIGKILL, at=4.0)]

    assert ranks_and_codes(failures_from_exits(exits, str(tmp_path))) == [(1, 9), (3, 2), (0, -9), (2, -15)]


@pytest.mark.parametrize("stop", [-signal.SIGTERM, -signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_rank_torch_stopped_comes_after_the_real_failure_even_when_its_exit_was_seen_first(tmp_path, monkeypatch,
                                                                                             stop):
    # Rank 0 exited 1; torch found rank 1 running and stopped it; under load the watch saw rank 1's end first.
    monkeypatch.setattr(teardown, "_stopping", {1001})

    failures = failures_from_exits([exit_(0, 1, at=2.4), exit_(1, stop, at=2.1)], str(tmp_path))

    assert ranks_and_codes(failures) == [(0, 1), (1, stop)]
    assert [f.collateral for f in failures] == [False, True]


def test_a_rank_torch_found_running_that_ended_with_its_own_code_is_no_collateral(tmp_path, monkeypatch):
    # Both raised; rank 1 ended on its own just as torch began its stop: its exit code is its own failure.
    monkeypatch.setattr(teardown, "_stopping", {1001})

    failures = failures_from_exits([exit_(0, 1, at=2.4), exit_(1, 1, at=2.1)], str(tmp_path))

    assert ranks_and_codes(failures) == [(1, 1), (0, 1)] and not any(f.collateral for f in failures)


def test_a_stop_signal_torch_did_not_send_keeps_its_place_by_time(tmp_path, monkeypatch):
    # The OOM killer's SIGKILL ended rank 1 before torch stopped anything: it is the root cause.
    monkeypatch.setattr(teardown, "_stopping", {1000})

    failures = failures_from_exits([exit_(0, -signal.SIGTERM, at=2.4), exit_(1, -signal.SIGKILL, at=2.1)],
                                   str(tmp_path))

    assert ranks_and_codes(failures) == [(1, -signal.SIGKILL), (0, -signal.SIGTERM)]
    assert [f.collateral for f in failures] == [False, True]


GLOO_PEER_CLOSED = ("[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by "
                    "peer [127.0.0.1]:41601. This is typically caused by a remote worker crashing.\n")


@pytest.mark.parametrize("words", [GLOO_PEER_CLOSED, "RuntimeError: Connection reset by peer\n",
                                   "torch.distributed.DistBackendError: NCCL error: remote process exited or there was "
                                   "a "
                                   "network error, NCCL version 2.21.5\nncclRemoteError: A call failed possibly due to "
                                   "a "
                                   "network error or a remote process exiting prematurely.\n"],
                         ids=["gloo-closed", "reset", "nccl-remote"])
def test_a_rank_whose_log_says_a_peer_went_away_is_not_the_cause_even_when_its_exit_was_seen_first(tmp_path, words):
    # Under load the watch can see the collateral exit a moment before the crash that caused it.
    write_log(tmp_path, 0, "stderr", words)
    write_log(tmp_path, 1, "stderr", "rank 1 crashing on purpose after its first epoch\n")

    failures = failures_from_exits([exit_(0, 1, at=1.0), exit_(1, 1, at=1.001)], str(tmp_path))

    assert ranks_and_codes(failures) == [(1, 1), (0, 1)]


def test_when_every_rank_says_a_peer_went_away_the_earliest_exit_still_comes_first(tmp_path):
    write_log(tmp_path, 0, "stderr", GLOO_PEER_CLOSED)
    write_log(tmp_path, 1, "stderr", GLOO_PEER_CLOSED.replace("rank0", "rank1"))

    failures = failures_from_exits([exit_(0, 1, at=2.0), exit_(1, 1, at=1.0)], str(tmp_path))

    assert ranks_and_codes(failures) == [(1, 1), (0, 1)]


def test_each_failure_carries_its_pid_and_its_own_ranks_log_tail(tmp_path):
    write_log(tmp_path, 0, "stderr", "rank 0 was told to stop\n")
    write_log(tmp_path, 1, "stderr", "Traceback (most recent call last):\nValueError: rank 1 broke\n")

    failures = failures_from_exits([exit_(0, -signal.SIGTERM, at=1.0), exit_(1, 7, at=1.0)], str(tmp_path))

    assert [(f.rank, f.returncode, f.pid, f.log_tail) for f in failures] == [
        (1, 7, 1001, "Traceback (most recent call last):\nValueError: rank 1 broke"),
        (0, -signal.SIGTERM, 1000, "rank 0 was told to stop"),
    ]


def test_a_failures_moment_is_wall_clock_time_so_nodes_can_compare_them(tmp_path):
    now = time.monotonic()
    failures = failures_from_exits([exit_(0, 3, at=now - 2.0)], str(tmp_path))

    assert abs(failures[0].at - (time.time() - 2.0)) < 1.0


# --- log tails -------------------------------------------------------------------------------------
def test_the_tail_prefers_stderr_over_stdout(tmp_path):
    write_log(tmp_path, 0, "stdout", "epoch 3\n")
    write_log(tmp_path, 0, "stderr", "RuntimeError: boom\n")

    assert _log_tail(str(tmp_path), 0) == "RuntimeError: boom"


@pytest.mark.parametrize("stderr", [None, "", "\n  \n\t\n"], ids=["no stderr file", "empty stderr", "blank stderr"])
def test_the_tail_falls_back_to_stdout_when_stderr_holds_nothing(tmp_path, stderr):
    write_log(tmp_path, 0, "stdout", "epoch 1\nepoch 2 then silence\n")
    if stderr is not None:
        write_log(tmp_path, 0, "stderr", stderr)

    assert _log_tail(str(tmp_path), 0) == "epoch 1\nepoch 2 then silence"


def test_the_tail_is_empty_when_the_rank_wrote_nothing_anywhere(tmp_path):
    write_log(tmp_path, 0, "stdout", "")
    write_log(tmp_path, 0, "stderr", "")
    write_log(tmp_path, 1, "stderr", "another rank's error\n")

    assert _log_tail(str(tmp_path), 0) == ""
    assert _log_tail(str(tmp_path / "no-such-folder"), 0) == ""


def test_the_tail_is_the_last_20_lines(tmp_path):
    write_log(tmp_path, 0, "stderr", "".join(f"line {number}\n" for number in range(1, 31)))

    tail = _log_tail(str(tmp_path), 0)

    assert tail.splitlines() == [f"line {number}" for number in range(11, 31)]


def test_the_tail_of_a_rank_that_flooded_its_log_is_its_true_last_lines_whatever_the_relay_skipped(tmp_path):
    flood = "".join(f"step {number} {'x' * 80}\n" for number in range(200_000))  # about 18 MB
    write_log(tmp_path, 0, "stderr", flood + "Traceback (most recent call last):\nRuntimeError: the real cause\n")

    tail = _log_tail(str(tmp_path), 0)

    assert tail.splitlines()[-2:] == ["Traceback (most recent call last):", "RuntimeError: the real cause"]
    assert "step 199999" in tail


def test_the_tail_is_the_asked_ranks_own_and_rank_1_is_not_rank_10(tmp_path):
    write_log(tmp_path, 1, "stderr", "rank 1's error\n")
    write_log(tmp_path, 10, "stderr", "rank 10's error\n")
    write_log(tmp_path, 0, "stdout", "rank 0's output\n")

    assert _log_tail(str(tmp_path), 1) == "rank 1's error"
    assert _log_tail(str(tmp_path), 10) == "rank 10's error"
    assert _log_tail(str(tmp_path), 0) == "rank 0's output"
    assert _log_tail(str(tmp_path), 2) == ""


# --- torch's failures ------------------------------------------------------------------------------
def _torch_failure(pid: int, exitcode: int, timestamp: int) -> SimpleNamespace:
    """What torch's ProcessFailure carries that matters here: its timestamp is whole seconds."""
    return SimpleNamespace(pid=pid, exitcode=exitcode, timestamp=timestamp, local_rank=pid - 1000)


def test_torchs_failures_go_by_when_the_watch_saw_each_exit_not_by_torchs_whole_second_stamps(tmp_path):
    # Rank 1 was SIGKILLed; rank 0 failed in the collective 1.3 s later but raised first in torch's eyes.
    now = time.monotonic()
    seen = {1001: now - 1.3, 1000: now}
    failed = {0: _torch_failure(1000, 1, timestamp=int(time.time()) - 5),
              1: _torch_failure(1001, -signal.SIGKILL, int(time.time()))}
    failures = failures_from_torch(failed, SimpleNamespace(exit_time=seen.get), str(tmp_path))

    assert ranks_and_codes(failures) == [(1, -signal.SIGKILL), (0, 1)]
    assert abs(failures[0].at - (time.time() - 1.3)) < 1.0


def test_a_failure_the_watch_did_not_see_keeps_torchs_time(tmp_path):
    stamp = int(time.time()) - 10
    failures = failures_from_torch({2: _torch_failure(1002, 3, stamp)}, SimpleNamespace(exit_time=lambda pid: None),
                                   str(tmp_path))
    assert ranks_and_codes(failures) == [(2, 3)] and failures[0].at == float(stamp)


def test_torchs_failures_put_the_ranks_torch_stopped_after_the_one_that_failed(tmp_path, monkeypatch):
    # The watch saw rank 1's SIGTERM first and never saw rank 0's exit; torch had found rank 1 running.
    monkeypatch.setattr(teardown, "_stopping", {1001})
    now = time.monotonic()
    failed = {0: _torch_failure(1000, 3, timestamp=int(time.time())),
              1: _torch_failure(1001, -signal.SIGTERM, int(time.time()) - 1)}
    failures = failures_from_torch(failed, SimpleNamespace(exit_time={1001: now - 3}.get), str(tmp_path))

    assert ranks_and_codes(failures) == [(0, 3), (1, -signal.SIGTERM)] and failures[1].collateral
