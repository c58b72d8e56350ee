"""The supervisor <-> agent protocol: one typed JSON object per line, read back into equal, immutable objects."""

from __future__ import annotations

import signal

import pytest

from pai_launch.wire import codec
from pai_launch.wire.protocol import REPORTS, REQUESTS, GenerationRequest, GenerationResult, WorkerFailure


def _request(**overrides) -> GenerationRequest:
    fields = dict(generation=3, nproc=2, python="/usr/bin/python3",
                  args=("-u", "train.py", "--pai_load_folder", "PAI", "--note", "two\nlines and ünïcode"),
                  env={"PAI_LAUNCH_GENERATION": "3", "PAI_LAUNCH_RUN_ID": "run-1", "OMP_NUM_THREADS": "1"},
                  log_dir="/tmp/pai-logs/generation-3", grace=7.5, elastic_run_id="pai-abc123")
    return GenerationRequest(**{**fields, **overrides})


def _one_line(line: bytes) -> None:
    assert isinstance(line, bytes)
    assert line.endswith(b"\n") and line.count(b"\n") == 1, line


def test_a_generation_request_round_trips_to_an_equal_request_with_its_args_still_a_tuple():
    request = _request()

    line = codec.encode(request)
    back = REQUESTS.decode(line)

    _one_line(line)
    assert back == request
    assert isinstance(back.args, tuple) and back.args[-1] == "two\nlines and ünïcode"
    assert back.env == request.env and isinstance(back.grace, float)


def test_a_request_with_no_script_arguments_round_trips():
    request = _request(args=(), env={})

    back = REQUESTS.decode(codec.encode(request))

    assert back == request and back.args == ()


def test_a_result_with_failures_round_trips_to_equal_worker_failures_in_a_tuple():
    failures = (
        WorkerFailure(rank=1, returncode=7, pid=4242, log_tail="Traceback (most recent call last):\n  boom\n"
                      "ValueError: ü"),
        WorkerFailure(rank=0, returncode=-signal.SIGTERM, pid=4241),
    )
    result = GenerationResult(generation=2, failures=failures, log_dir="/tmp/logs/generation-2")

    line = codec.encode(result)
    back = REPORTS.decode(line)

    _one_line(line)
    assert back == result
    assert isinstance(back.failures, tuple)
    assert all(isinstance(failure, WorkerFailure) for failure in back.failures)
    assert [(f.rank, f.returncode, f.pid) for f in back.failures] == [(1, 7, 4242), (0, -15, 4241)]
    assert back.failures[0].log_tail.endswith("ValueError: ü") and back.failures[1].log_tail == ""


@pytest.mark.parametrize("result", [
    GenerationResult(generation=1),
    GenerationResult(generation=1, log_dir="/tmp/logs/generation-1"),
    GenerationResult(generation=4, error="RendezvousTimeoutError: no peers joined", log_dir="/tmp/l"),
], ids=["defaults", "all workers exited 0", "launcher error"])
def test_results_without_failures_round_trip_with_an_empty_tuple(result):
    back = REPORTS.decode(codec.encode(result))

    assert back == result
    assert back.failures == () and isinstance(back.failures, tuple)
    assert back.error == result.error


def test_the_objects_are_frozen_and_hashable_so_a_read_result_cannot_be_changed():
    back = REPORTS.decode(codec.encode(GenerationResult(5, failures=(WorkerFailure(0, 3, 9),))))

    with pytest.raises(AttributeError):
        back.generation = 6  # type: ignore[misc]
    assert hash(back.failures) == hash((WorkerFailure(0, 3, 9),))


# --- every message type, both directions ------------------------------------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ALL_TYPES = [(protocol, tag, cls) for protocol in (REQUESTS, REPORTS) for tag, cls in protocol.types().items()]


def test_each_direction_knows_its_own_messages():
    assert set(REQUESTS.types()) == {"generation", "ping", "cancel", "stop"}
    assert set(REPORTS.types()) == {"ready", "joined", "result", "pong", "stop_raised", "forkserver_restarted",
                                    "went_cold", "retiring"}


@pytest.mark.parametrize("protocol,tag,cls", ALL_TYPES, ids=[tag for _, tag, _ in ALL_TYPES])
@settings(max_examples=60, deadline=None, derandomize=True)
@given(data=st.data())
def test_every_message_type_round_trips_to_an_equal_message_on_one_line(protocol, tag, cls, data):
    message = data.draw(st.from_type(cls))

    line = codec.encode(message)
    back = protocol.decode(line)

    _one_line(line)
    assert type(back) is cls
    assert codec.encode(back) == line
    assert back == message or b"NaN" in line  # a float NaN is equal to nothing, itself included


@pytest.mark.parametrize("line,problem", [
    (b'{"type": "resize", "nproc": 4}', "unknown message type 'resize'"),
    (b'{"seq": 1}', "without a type tag"),
    (b'{"type": "ping", "seq": "1"}', "ping.seq: expected int, got str"),
    (b'{"type": "ping", "seq": true}', "ping.seq: expected int, got bool"),
    (b'{"type": "ping"}', "missing field(s) seq"),
    (b'{"type": "ping", "seq": 1, "colour": "red"}', "unknown field(s) colour"),
    (b'{"type": "result", "generation": 1}', "unknown message type 'result'"),  # a report sent the wrong way
    (b'{"type": "generation", "generation": 1, "nproc": 2, "python": "p", "args": "train.py", "env": {}, '
     b'"log_dir": "l", "grace": 1, "elastic_run_id": "r"}', "generation.args: expected a list, got str"),
    (b'{"type": "stop"', "not a JSON line"),
], ids=["unknown type", "no tag", "wrong type", "bool for int", "missing", "unknown field", "wrong direction",
        "string for tuple", "torn"])
def test_a_line_that_is_no_request_is_one_error_naming_the_problem(line, problem):
    with pytest.raises(codec.WireError) as caught:
        REQUESTS.decode(line)
    assert problem in str(caught.value) and str(caught.value).startswith("a request to the agent: ")


def test_a_nested_field_of_the_wrong_type_is_named_by_its_path():
    result = codec.encode(GenerationResult(2, failures=(WorkerFailure(1, 7, 42),))).replace(b'"rank": 1',
                                                                                            b'"rank": null')
    with pytest.raises(codec.WireError, match=r"result\.failures\[0\]\.rank: expected int, got null"):
        REPORTS.decode(result)


def test_decoding_with_an_expected_type_refuses_another_message():
    with pytest.raises(codec.WireError, match="a 'ping' message where 'cancel' was expected"):
        from pai_launch.wire.protocol import Cancel, Ping
        REQUESTS.decode(codec.encode(Ping(3)), expect=Cancel)


def test_only_frozen_dataclasses_register_and_a_tag_registers_once():
    from dataclasses import dataclass

    scratch = codec.Protocol("scratch")

    @dataclass
    class Mutable:
        x: int

    with pytest.raises(TypeError, match="frozen dataclass"):
        scratch.message("m")(Mutable)
    with pytest.raises(TypeError, match="registered already"):
        scratch.message("ping")(REQUESTS.types()["ping"])


def test_the_line_reader_joins_split_writes_skips_blank_lines_and_drops_a_torn_last_line():
    import os
    import threading

    read, write = os.pipe()
    parts = [b'{"type": "ping", "se', b'q": 1}\n\n', b'{"type": "ping", "seq": 2}\n{"type": "pi']

    def writer():
        for part in parts:
            os.write(write, part)
        os.close(write)

    threading.Thread(target=writer).start()
    try:
        lines = list(codec.read_lines(read, chunk=7))
    finally:
        os.close(read)
    assert [REQUESTS.decode(line).seq for line in lines] == [1, 2]


def test_the_line_reader_refuses_a_line_past_its_limit():
    import os
    import threading

    read, write = os.pipe()

    def writer():
        try:
            os.write(write, b"x" * 5000)
        finally:
            os.close(write)

    threading.Thread(target=writer).start()
    try:
        with pytest.raises(codec.WireError, match="longer than 1024 bytes"):
            list(codec.read_lines(read, limit=1024, chunk=512))
    finally:
        os.close(read)
