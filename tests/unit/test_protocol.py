"""The supervisor <-> agent protocol: one JSON object per line, read back into equal, immutable objects."""

from __future__ import annotations

import signal

import pytest

from pai_launch.wire.protocol import GenerationRequest, GenerationResult, WorkerFailure


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

    line = request.to_line()
    back = GenerationRequest.from_line(line)

    _one_line(line)
    assert back == request
    assert isinstance(back.args, tuple) and back.args[-1] == "two\nlines and ünïcode"
    assert back.env == request.env and isinstance(back.grace, float)


def test_a_request_with_no_script_arguments_round_trips():
    request = _request(args=(), env={})

    back = GenerationRequest.from_line(request.to_line())

    assert back == request and back.args == ()


def test_a_result_with_failures_round_trips_to_equal_worker_failures_in_a_tuple():
    failures = (
        WorkerFailure(rank=1, returncode=7, pid=4242, log_tail="Traceback (most recent call last):\n  boom\nValueError: ü"),
        WorkerFailure(rank=0, returncode=-signal.SIGTERM, pid=4241),
    )
    result = GenerationResult(generation=2, failures=failures, log_dir="/tmp/logs/generation-2")

    line = result.to_line()
    back = GenerationResult.from_line(line)

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
    back = GenerationResult.from_line(result.to_line())

    assert back == result
    assert back.failures == () and isinstance(back.failures, tuple)
    assert back.error == result.error


def test_the_objects_are_frozen_and_hashable_so_a_read_result_cannot_be_changed():
    back = GenerationResult.from_line(GenerationResult(5, failures=(WorkerFailure(0, 3, 9),)).to_line())

    with pytest.raises(AttributeError):
        back.generation = 6  # type: ignore[misc]
    assert hash(back.failures) == hash((WorkerFailure(0, 3, 9),))
