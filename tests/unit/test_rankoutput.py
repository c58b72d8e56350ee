"""Which ranks' output reaches the console (placement.rankoutput), from torchrun's --redirects, --tee and
--local-ranks-filter, and the relay that leaves the muted streams in their files. Pure: no process."""

from __future__ import annotations

import pytest

from pai_launch.agent.relay import LogRelay
from pai_launch.cli.specbuilder import build
from pai_launch.placement import rankoutput
from pai_launch.placement.spec import PreflightError
from pai_launch.supervise.job import plan
from tests.unit.test_relay import Logs
from tests.unit.test_specbuilder import host, typed

BOTH = ("stdout", "stderr")


@pytest.mark.parametrize("text, parsed", [
    ("0", {None: ()}), ("3", {None: BOTH}), ("1", {None: ("stdout",)}), (" 2 ", {None: ("stderr",)}),
    ("0:1,1:2", {0: ("stdout",), 1: ("stderr",)}), ("1:3", {1: BOTH}),
])
def test_torchruns_stream_values_for_every_rank_or_rank_by_rank(text, parsed):
    assert rankoutput.parse_streams("--redirects", text) == parsed


@pytest.mark.parametrize("text, message", [
    ("4", "--tee '4' is not 0, 1, 2 or 3"), ("x", "is not 0, 1, 2 or 3"),
    ("0:1,a:2", "'a:2' is not LOCAL_RANK:STREAMS"),
    ("0:9", "'9' is not 0, 1, 2 or 3"),
])
def test_a_bad_stream_value_is_one_line_naming_the_option(text, message):
    with pytest.raises(PreflightError, match=message):
        rankoutput.parse_streams("--tee", text)


def test_the_console_shows_what_is_not_redirected_or_is_teed_and_only_the_ranks_filtered():
    assert rankoutput.muted(2, "0", "0", "") == ()
    assert rankoutput.muted(2, "3", "0", "") == ((0, "stdout"), (0, "stderr"), (1, "stdout"), (1, "stderr"))
    assert rankoutput.muted(2, "3", "0:2", "") == ((0, "stdout"), (1, "stdout"), (1, "stderr"))
    assert rankoutput.muted(3, "1:1", "0", "") == ((1, "stdout"),)
    assert rankoutput.muted(3, "0", "3", "0,2") == ((1, "stdout"), (1, "stderr"))
    assert rankoutput.muted(2, "2", "0", "0") == ((0, "stderr"), (1, "stdout"), (1, "stderr"))
    with pytest.raises(PreflightError, match="--local-ranks-filter '0,x': 'x' is not a local rank"):
        rankoutput.muted(2, "0", "0", "0,x")


def test_the_spec_and_each_generation_carry_the_muted_streams(tmp_path):
    spec = build(typed(redirects="1", tee="0:1", log_dir=tmp_path, nproc=2), host()).spec
    assert spec.muted == ((1, "stdout"),)
    assert plan.generation_request(spec, "RID", 1, None, {}, "/logs").muted == ((1, "stdout"),)


def test_redirected_output_needs_a_folder_to_keep_it_and_data_parallel_has_no_ranks(tmp_path):
    with pytest.raises(PreflightError, match="--redirects 3 keeps output off the console.*give --log-dir DIR"):
        build(typed(redirects="3"), host())
    assert build(typed(tee="3", local_ranks_filter="0"), host()).spec.muted == ()  # one worker: rank 0 is shown
    with pytest.raises(PreflightError, match="no effect with --data-parallel"):
        build(typed(local_ranks_filter="1", data_parallel=True, nproc=None), host({"CUDA_VISIBLE_DEVICES": "0,1"}))


def test_the_relay_leaves_muted_streams_in_their_files(tmp_path):
    logs = Logs(tmp_path / "logs")
    for rank in (0, 1):
        for stream in BOTH:
            logs.append(rank, stream, f"{stream} of {rank}\n".encode())
    LogRelay(str(logs.root), sinks=logs.sinks, muted=((0, "stderr"), (1, "stdout"))).stop()
    assert logs.out() == b"[rank0]: stdout of 0\n"
    assert logs.out("stderr") == b"[rank1]: stderr of 1\n"


def test_a_local_rank_this_machine_does_not_run_is_refused():
    import pytest

    from pai_launch.placement.rankoutput import muted
    from pai_launch.placement.spec import PreflightError

    with pytest.raises(PreflightError, match=r"--local-ranks-filter '7' names local rank 7, but this machine runs 2 "
                                             r"worker\(s\), local ranks 0..1"):
        muted(2, "0", "0", "7")
    with pytest.raises(PreflightError, match="--redirects '0:3,2:1' names local rank 2"):
        muted(2, "0:3,2:1", "0", "")
    assert muted(2, "0", "0", "1") == ((0, "stdout"), (0, "stderr"))


def test_a_rank_named_twice_is_refused_not_silently_overridden():
    import pytest

    from pai_launch.placement.rankoutput import parse_streams
    from pai_launch.placement.spec import PreflightError

    with pytest.raises(PreflightError, match=r"-r '0:1,0:2' names local rank 0 twice: give each rank once"):
        parse_streams("-r", "0:1,0:2")
    with pytest.raises(PreflightError, match="--tee '1:3,1:3' names local rank 1 twice"):
        parse_streams("--tee", "1:3,1:3")
