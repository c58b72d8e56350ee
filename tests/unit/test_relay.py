"""The agent's log relay: torch's per-rank log files copied line by line to the agent's own streams, prefixed
`[rankN]: `, each line exactly once, a partial last line held back until it is completed or the relay stops.

The log folder is laid out as torch's DefaultLogsSpecs leaves it: LOG_DIR/<run>/attempt_0/<local_rank>/std{out,err}.log.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest

from pai_launch.agent.relay import Limits, LogRelay, label_lines, prefixed, split_lines
from tests.helpers import wait_until

RUN = "pai-abc123_x7y8z9"


class Logs:
    """A torch-style log folder the test appends to, and the two sinks the relay writes into."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sinks = {"stdout": io.BytesIO(), "stderr": io.BytesIO()}

    def append(self, rank: int, stream: str, data: bytes) -> None:
        path = self.root / RUN / "attempt_0" / str(rank) / f"{stream}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as handle:
            handle.write(data)

    def relay(self) -> LogRelay:
        return LogRelay(str(self.root), sinks=self.sinks)

    def out(self, stream: str = "stdout") -> bytes:
        return self.sinks[stream].getvalue()


@pytest.fixture
def logs(tmp_path: Path) -> Logs:
    return Logs(tmp_path / "logs")


def test_complete_lines_are_copied_with_the_rank_prefix(logs):
    logs.append(0, "stdout", b"epoch 1 loss 0.5\nepoch 2 loss 0.4\n")
    relay = logs.relay()

    relay.drain()

    assert logs.out() == b"[rank0]: epoch 1 loss 0.5\n[rank0]: epoch 2 loss 0.4\n"
    assert logs.out("stderr") == b""


def test_a_partial_last_line_is_held_back_until_its_newline_arrives(logs):
    logs.append(0, "stdout", b"first\nsecond half-wri")
    relay = logs.relay()

    relay.drain()
    assert logs.out() == b"[rank0]: first\n"

    logs.append(0, "stdout", b"tten\nthird")
    relay.drain()
    assert logs.out() == b"[rank0]: first\n[rank0]: second half-written\n"


def test_stop_copies_the_unterminated_last_line_once(logs):
    logs.append(1, "stderr", b"Traceback (most recent call last):\nRuntimeError: no newline before the crash")
    relay = logs.relay()
    relay.drain()
    assert logs.out("stderr") == b"[rank1]: Traceback (most recent call last):\n"

    relay.stop()
    relay.drain()
    relay.drain(final=True)

    assert logs.out("stderr") == (b"[rank1]: Traceback (most recent call last):\n"
                                  b"[rank1]: RuntimeError: no newline before the crash\n")


def test_stop_without_a_start_still_drains_everything(logs):
    logs.append(0, "stdout", b"only line, unterminated")

    logs.relay().stop()

    assert logs.out() == b"[rank0]: only line, unterminated\n"


def test_several_ranks_and_both_streams_go_to_their_own_sink_with_their_own_prefix(logs):
    logs.append(0, "stdout", b"r0 out\n")
    logs.append(0, "stderr", b"r0 err\n")
    logs.append(1, "stdout", b"r1 out\n")
    logs.append(1, "stderr", b"r1 err\n")
    logs.append(10, "stdout", b"r10 out\n")
    relay = logs.relay()

    relay.drain()

    assert sorted(logs.out().splitlines()) == [b"[rank0]: r0 out", b"[rank10]: r10 out", b"[rank1]: r1 out"]
    assert sorted(logs.out("stderr").splitlines()) == [b"[rank0]: r0 err", b"[rank1]: r1 err"]


def test_a_rank_that_appears_later_is_picked_up(logs):
    logs.append(0, "stdout", b"rank 0 first\n")
    relay = logs.relay()
    relay.drain()

    logs.append(1, "stdout", b"rank 1 late\n")
    relay.drain()

    assert logs.out() == b"[rank0]: rank 0 first\n[rank1]: rank 1 late\n"


def test_repeated_drains_never_copy_a_line_twice(logs):
    relay = logs.relay()
    expected = []
    for number in range(5):
        logs.append(0, "stdout", f"line {number}\n".encode())
        expected.append(f"[rank0]: line {number}\n".encode())
        relay.drain()
        relay.drain()

    relay.stop()

    assert logs.out() == b"".join(expected)


def test_files_that_are_not_a_ranks_stdout_or_stderr_are_not_relayed(logs):
    logs.append(0, "stdout", b"wanted\n")
    (logs.root / RUN / "attempt_0" / "0" / "error.json").write_text('{"message": "not a log"}\n')
    (logs.root / RUN / "attempt_0" / "0" / "stdlib.log").write_text("not a stream either\n")
    not_a_rank = logs.root / RUN / "attempt_0" / "agent"
    not_a_rank.mkdir()
    (not_a_rank / "stdout.log").write_text("no rank folder\n")

    logs.relay().stop()

    assert logs.out() == b"[rank0]: wanted\n" and logs.out("stderr") == b""


@pytest.mark.timeout(20)
def test_the_running_relay_copies_lines_as_they_are_written_and_stop_drains_the_rest(logs):
    relay = logs.relay().start()
    try:
        logs.append(0, "stdout", b"while running\n")
        logs.append(1, "stderr", b"warning: on stderr\n")
        wait_until(lambda: logs.out() == b"[rank0]: while running\n", 10, message="the relay thread to copy rank 0's "
                   "line")
        wait_until(lambda: logs.out("stderr") == b"[rank1]: warning: on stderr\n", 10, message="rank 1's stderr line")

        logs.append(0, "stdout", b"more\nlast words")
        wait_until(lambda: logs.out().endswith(b"[rank0]: more\n"), 10, message="the next complete line")
    finally:
        relay.stop()

    assert logs.out() == b"[rank0]: while running\n[rank0]: more\n[rank0]: last words\n"
    assert logs.out("stderr") == b"[rank1]: warning: on stderr\n"


# --- one rank prefix per line ----------------------------------------------------------------------------
def test_a_line_that_already_has_its_ranks_prefix_is_not_labelled_again(logs):
    # torch's exception hook writes a worker's traceback as `[rankN]: ...`, the blank line between its parts bare.
    logs.append(0, "stderr", b"[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\"\n\n"
                             b"[rank0]: RuntimeError: boom\n")

    logs.relay().stop()

    assert logs.out("stderr") == (b"[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\"\n"
                                  b"[rank0]: \n"
                                  b"[rank0]: RuntimeError: boom\n")


def test_another_ranks_prefix_is_part_of_the_line_and_normal_lines_are_labelled_once(logs):
    logs.append(1, "stdout", b"[rank0]: what rank 0 said\nepoch 1\n[rank1]x not a prefix\n[rank10]: not rank 1\n")

    logs.relay().stop()

    assert logs.out() == (b"[rank1]: [rank0]: what rank 0 said\n[rank1]: epoch 1\n[rank1]: [rank1]x not a prefix\n"
                          b"[rank1]: [rank10]: not rank 1\n")


def test_in_a_multi_node_job_torchs_prefix_for_the_same_rank_gives_way_to_the_label_naming_the_node(tmp_path):
    logs = Logs(tmp_path / "logs")
    logs.append(1, "stderr", b"[rank5]: Traceback (most recent call last):\n[rank5 node1]: printed by the script\n"
                             b"[rank4]: another rank\nplain\n")

    LogRelay(str(logs.root), sinks=logs.sinks, head=lambda local_rank: f"[rank{4 + local_rank} node1]: ").stop()

    assert logs.out("stderr") == (b"[rank5 node1]: Traceback (most recent call last):\n[rank5 node1]: printed by the "
                                  b"script\n"
                                  b"[rank5 node1]: [rank4]: another rank\n[rank5 node1]: plain\n")


def test_prefixed_labels_a_line_once():
    assert prefixed(b"[rank2]: ", b"hello") == b"[rank2]: hello"
    assert prefixed(b"[rank2]: ", b"[rank2]: hello") == b"[rank2]: hello"
    assert prefixed(b"[rank2]: ", b"[rank2]:hello") == b"[rank2]: [rank2]:hello"
    assert prefixed(b"[rank2]: ", b"") == b"[rank2]: "
    assert prefixed(b"[local rank 2 node1]: ", b"[rank2]: x") == b"[local rank 2 node1]: [rank2]: x"
    assert prefixed(b"[local rank 2 node1]: ", b"[local rank 2 node1]: x") == b"[local rank 2 node1]: x"



def test_a_head_that_is_no_label_goes_before_every_line_as_it_is():
    """A rendered --log-line-prefix-template: torch's console copy puts it before each line, nothing taken away."""
    assert prefixed(b"0", b"0.5 loss") == b"00.5 loss"
    assert prefixed(b"R1|", b"[rank1]: x") == b"R1|[rank1]: x"
    assert b"".join(label_lines(b"R1|", b"R1|a\n[rank1]: b\n\n")) == b"R1|R1|a\nR1|[rank1]: b\nR1|\n"
    assert b"".join(label_lines(b"", b"a\nb\n")) == b"a\nb\n"


def test_the_relay_starts_each_ranks_lines_with_its_head(logs):
    logs.append(0, "stdout", b"a\n")
    logs.append(1, "stderr", b"b\n[rank1]: c\n")

    LogRelay(str(logs.root), sinks=logs.sinks, head=lambda local_rank: f"<{local_rank}> ").stop()

    assert (logs.out(), logs.out("stderr")) == (b"<0> a\n", b"<1> b\n<1> [rank1]: c\n")

# --- bounded chunks, fast labelling, skipping with a note ------------------------------------------------------
MIXED = (b"plain\n[rank0]: torch's prefix\n\n[rank0]x not one\n[rank1]: another rank\n[rank0]: \nlast\n")


@pytest.mark.parametrize("data", [b"a\nb\n", b"\n\n", b"one line\n", MIXED, b"[rank0]: first\nsecond\n"])
def test_label_lines_labels_a_chunk_as_prefixed_labels_each_line(data):
    expected = b"".join(prefixed(b"[rank0]: ", line) + b"\n" for line in data[:-1].split(b"\n"))

    assert b"".join(label_lines(b"[rank0]: ", data)) == expected
    assert b"".join(label_lines(b"[rank0 node2]: ", data)) == b"".join(prefixed(b"[rank0 node2]: ", line) + b"\n"
                                                              for line in data[:-1].split(b"\n"))


def test_split_lines_holds_back_the_unterminated_rest_and_gives_out_a_line_that_is_too_long():
    assert split_lines(b"par", b"tial\nnext\nhalf", 100) == (b"partial\nnext\n", b"half")
    assert split_lines(b"ab", b"cd", 100) == (b"", b"abcd")
    assert split_lines(b"", b"", 100) == (b"", b"")
    assert split_lines(b"x" * 8, b"y" * 4, 10) == (b"x" * 8 + b"y" * 4 + b"\n", b"")
    assert split_lines(b"", b"ok\n" + b"z" * 11, 10) == (b"ok\n" + b"z" * 11 + b"\n", b"")


def test_tiny_chunks_relay_every_line_exactly_once_whatever_the_boundaries(logs):
    lines = [f"line {n} {'x' * (n % 13)}".encode() for n in range(300)]
    logs.append(0, "stdout", b"\n".join(lines[:150]) + b"\n")
    relay = LogRelay(str(logs.root), sinks=logs.sinks, limits=Limits(chunk=7, turn=50, max_lag=1 << 30))

    passes = 0
    while relay.drain():
        passes += 1
    logs.append(0, "stdout", b"\n".join(lines[150:]) + b"\n")
    relay.stop(within=60)

    assert passes > 10, "one pass relays at most a turn"
    assert logs.out() == b"".join(b"[rank0]: " + line + b"\n" for line in lines)
    assert relay.skipped == {}


def test_one_pass_reads_at_most_a_turn_from_each_file_so_a_flooding_rank_does_not_starve_another(logs):
    logs.append(0, "stdout", b"flood\n" * 10_000)
    logs.append(1, "stdout", b"quiet\n")
    relay = LogRelay(str(logs.root), sinks=logs.sinks, limits=Limits(chunk=600, turn=1200, max_lag=1 << 30))

    assert relay.drain() is True

    out = logs.out()
    assert out.count(b"[rank0]: flood\n") == 200 and out.count(b"[rank1]: quiet\n") == 1


def test_a_rank_too_far_behind_is_skipped_to_its_newest_lines_with_one_line_saying_how_much(logs):
    lines = [f"{n:05d} {'y' * 20}".encode() for n in range(2000)]  # 27 bytes a line
    data = b"\n".join(lines) + b"\n"
    logs.append(0, "stdout", data)
    logs.append(1, "stdout", b"rank 1 is fine\n")
    relay = LogRelay(str(logs.root), sinks=logs.sinks, limits=Limits(chunk=4096, max_lag=10_000, tail=1000))

    relay.stop(within=60)

    out = logs.out().splitlines()
    notes = [line for line in out if b"pai-launch: skipped" in line]
    assert notes == [b"[rank0]: pai-launch: skipped 53001 bytes (1963 lines) of this rank's stdout to keep up "
                     b"(all of it is in its log file); the lines below are its newest"]
    relayed = [line for line in out if line.startswith(b"[rank0]: ") and line not in notes]
    assert relayed == [b"[rank0]: " + line for line in lines[-37:]], "the true last lines, whole"
    assert 53001 + sum(len(line) + 1 for line in lines[-37:]) == len(data)
    assert b"[rank1]: rank 1 is fine" in out
    assert relay.skipped == {str(logs.root / RUN / "attempt_0" / "0" / "stdout.log"): (53001, 1963)}


def test_the_final_drain_past_its_deadline_keeps_each_ranks_last_lines_and_says_what_it_left_out(logs):
    for rank in (0, 1):
        logs.append(rank, "stderr", b"".join(f"r{rank} {n}\n".encode() for n in range(50_000)) + b"r%d the end" % rank)
    relay = LogRelay(str(logs.root), sinks=logs.sinks, limits=Limits(chunk=1024, tail=200))

    relay.stop(within=0)

    out = logs.out("stderr").splitlines()
    for rank in (0, 1):
        mine = [line for line in out if line.startswith(b"[rank%d]: " % rank)]
        assert sum(b"pai-launch: skipped" in line for line in mine) == 1
        assert mine[-2:] == [b"[rank%d]: r%d 49999" % (rank, rank), b"[rank%d]: r%d the end" % (rank, rank)]
        (skipped_bytes, skipped_lines), = [v for k, v in relay.skipped.items() if f"/{rank}/" in k]
        assert skipped_lines + len(mine) - 1 == 50_001 and skipped_bytes > 0


@pytest.mark.timeout(30)
def test_stop_returns_within_its_bound_while_the_sink_blocks(logs):
    release = threading.Event()

    class Blocked(io.BytesIO):
        def write(self, data):
            release.wait()
            return super().write(data)

    logs.sinks["stdout"] = Blocked()
    logs.append(0, "stdout", b"stuck\n")
    relay = logs.relay().start()
    stopper = threading.Thread(target=relay.stop, kwargs={"within": 0.2})
    try:
        wait_until(lambda: relay._thread.is_alive() and relay._files, 10, message="the relay to take the file")
        stopper.start()
        stopper.join(10)
        assert not stopper.is_alive(), "stop() waited on a blocked sink"
    finally:
        release.set()
        stopper.join(10)
