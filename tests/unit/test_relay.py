"""The agent's log relay: torch's per-rank log files copied line by line to the agent's own streams, prefixed
`[rankN]: `, each line exactly once, a partial last line held back until it is completed or the relay stops.

The log folder is laid out as torch's DefaultLogsSpecs leaves it: LOG_DIR/<run>/attempt_0/<local_rank>/std{out,err}.log.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from pai_launch.relay import LogRelay, prefixed
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
        wait_until(lambda: logs.out() == b"[rank0]: while running\n", 10, message="the relay thread to copy rank 0's line")
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

    assert logs.out("stderr") == (b"[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\"\n[rank0]: \n"
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

    LogRelay(str(logs.root), sinks=logs.sinks, label=lambda local_rank: f"[rank{4 + local_rank} node1]").stop()

    assert logs.out("stderr") == (b"[rank5 node1]: Traceback (most recent call last):\n[rank5 node1]: printed by the script\n"
                                  b"[rank5 node1]: [rank4]: another rank\n[rank5 node1]: plain\n")


def test_prefixed_labels_a_line_once():
    assert prefixed(b"[rank2]", b"hello") == b"[rank2]: hello"
    assert prefixed(b"[rank2]", b"[rank2]: hello") == b"[rank2]: hello"
    assert prefixed(b"[rank2]", b"[rank2]:hello") == b"[rank2]: [rank2]:hello"
    assert prefixed(b"[rank2]", b"") == b"[rank2]: "
    assert prefixed(b"[local rank 2 node1]", b"[rank2]: x") == b"[local rank 2 node1]: [rank2]: x"
