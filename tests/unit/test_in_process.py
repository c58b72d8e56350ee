"""--restructure in-process, its pure parts: the option, what the workers are told, the record rank 0 leaves and how
the supervisor, status and metrics read it, the checks that name a rank whose model differs."""

import json
from pathlib import Path

import pytest

from pai_launch import in_process
from pai_launch.placement import options
from pai_launch.placement.spec import IN_PROCESS, LaunchSpec, PreflightError
from pai_launch.savefmt import restructure_record
from pai_launch.status.story import Story
from pai_launch.supervise.job import plan
from pai_launch.wire import log_events


def spec(tmp_path, **overrides):
    (tmp_path / "train.py").write_text("print('hi')\n")
    return LaunchSpec(**{**dict(script=Path("train.py"), workdir=tmp_path, python="/py"), **overrides})


def test_the_supervisor_and_the_training_process_name_the_same_variables():
    """plan (supervisor side) and in_process (the user's process) cannot import each other: the names must agree."""
    assert (plan.RESTRUCTURE_ENV, plan.RECORDS_ENV, plan.SAVE_DIR_ENV) == (
        in_process.MODE_ENV, in_process.RECORDS_ENV, in_process.SAVE_DIR_ENV)
    assert IN_PROCESS == in_process.IN_PROCESS


def test_workers_are_told_of_in_process_restructures_and_where_to_record_them(tmp_path):
    records = tmp_path / "PAI" / ".pai-launch" / "restructures"
    env = plan.generation_env(spec(tmp_path, restructure="in-process"), "RID", 2, {}, tmp_path / "PAI", records)
    assert env[plan.RESTRUCTURE_ENV] == "in-process"
    assert env[plan.RECORDS_ENV] == str(records) and env[plan.SAVE_DIR_ENV] == str(tmp_path / "PAI")
    assert in_process.chosen(env)


def test_restart_mode_and_data_parallel_tell_the_workers_nothing(tmp_path):
    for given in (spec(tmp_path), spec(tmp_path, restructure="in-process", data_parallel=True)):
        env = plan.generation_env(given, "RID", 2, {}, tmp_path / "PAI", tmp_path / "records")
        assert not set(env) & {plan.RESTRUCTURE_ENV, plan.RECORDS_ENV, plan.SAVE_DIR_ENV}
        assert not in_process.chosen(env)


def test_without_a_records_folder_the_mode_is_told_but_no_folder(tmp_path):
    env = plan.generation_env(spec(tmp_path, restructure="in-process"), "RID", 1, {})
    assert env[plan.RESTRUCTURE_ENV] == "in-process" and plan.RECORDS_ENV not in env


def test_an_unknown_mode_is_a_one_line_preflight_error(tmp_path):
    with pytest.raises(PreflightError, match=r"--restructure 'inplace' is unknown: use restart .* or in-process"):
        options.check(spec(tmp_path, restructure="inplace"), chosen_nproc=None)


@pytest.mark.parametrize("mine, rank0, expected", [
    ([("a", (2,)), ("b", (3,))], [("a", (2,)), ("b", (3,))], None),
    ([("a", (2,)), ("b", (4,))], [("a", (2,)), ("b", (3,))], "b has shape [4], rank 0's [3]"),
    ([("a", (2,))], [("a", (2,)), ("b", (3,))], "1 parameters, rank 0 has 2"),
    ([("x", (2,))], [("a", (2,))], "parameter 'x' where rank 0 has 'a'"),
])
def test_the_first_structural_difference_is_named(mine, rank0, expected):
    assert in_process.structure_difference(mine, rank0) == expected


def test_values_differ_only_beyond_the_tolerance():
    names = ["w (sum)", "w (sum of squares)"]
    assert in_process.value_difference(names, [1.0, 2.0], [1.0, 2.0]) is None
    assert in_process.value_difference(names, [1.0, 2.0 + 1e-13], [1.0, 2.0]) is None
    assert in_process.value_difference(names, [1.0, 2.5],
                                       [1.0, 2.0]) == "w (sum of squares) sums to 2.5, rank 0's to 2.0"


def _record(**fields):
    base = dict(switch="switch_3.pt", resumed_s=0.12, rewrap_s=0.05, ranks=2, parameters=1872, memory_before=None,
                memory_after=None, at=1.5)
    return json.dumps({**base, **fields}).encode()


def test_a_record_keeps_only_known_fields_of_the_right_kind():
    read = restructure_record.parse(_record(ranks="two", extra=1, resumed_s=True))
    assert read == {"switch": "switch_3.pt", "rewrap_s": 0.05, "parameters": 1872, "at": 1.5}
    assert restructure_record.parse(b"[1, 2]") is None and restructure_record.parse(b"{torn") is None


def test_the_record_rank_0_writes_names_the_newest_switch_file_and_the_time_since_it(tmp_path):
    save, records = tmp_path / "PAI", tmp_path / "records"
    save.mkdir()
    records.mkdir()
    for n in (2, 4):
        (save / f"switch_{n}.pt").write_bytes(b"x")
    written = (save / "switch_4.pt").stat().st_mtime
    entry = in_process.Record(None, None, 0.05, 2, 10, None, None, at=written + 0.25)
    path = in_process.record(entry, {in_process.RECORDS_ENV: str(records), in_process.SAVE_DIR_ENV: str(save)})
    assert path == records / "switch_4.json"
    read = restructure_record.read(path)
    assert read["switch"] == "switch_4.pt" and read["resumed_s"] == pytest.approx(0.25, abs=1e-3)
    assert in_process.record(entry, {}) is None  # no launcher to tell (plain torchrun)


def test_status_counts_restructures_inside_a_generation():
    story = Story()
    story.on_generation_started({"generation": 1}, 10.0, story.session)
    for n, dendrites in ((2, 1), (4, 2)):
        story.on_restructured_in_process({"generation": 1, "file": f"switch_{n}.pt", "dendrites": dendrites}, 11.0,
                                         story.session)
    (generation,) = story.history.generations
    assert generation.in_process == 2 and generation.switch_files == ["switch_2.pt", "switch_4.pt"]
    assert generation.dendrites == 2


def test_the_event_declares_what_the_supervisor_logs():
    assert {"generation", "switch", "file", "resumed_s", "rewrap_s",
            "dendrites"} <= log_events.RESTRUCTURED_IN_PROCESS.fields


class _Recorder:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args, **fields: self.calls.append((name, args, fields))


def test_the_supervisor_logs_each_record_once_as_progress(tmp_path):
    """A record becomes restructured_in_process (once, though watchdog reports a file several times) and training
    activity for the stall timer; the dendrite count the generation's end judges from stays its start's."""
    from types import SimpleNamespace

    from pai_launch.core import machine
    from pai_launch.core.events import SaveActivity
    from pai_launch.core.observations import RestructureRecorded
    from pai_launch.supervise.loop.translator import Translator

    save, records = tmp_path / "PAI", tmp_path / "PAI" / ".pai-launch" / "restructures"
    records.mkdir(parents=True)
    (records / "switch_2.json").write_bytes(_record(switch="switch_2.pt"))
    observer = Translator.__new__(Translator)
    observer.session, observer.log, observer.notifier = SimpleNamespace(save_dir=save), _Recorder(), _Recorder()
    observer.recorded, observer.dendrites = set(), 0
    state = machine.start(save_name="PAI", generation=3)
    raw = RestructureRecorded(str(records / "switch_2.json"), now=7.0)

    assert observer.event_for(raw, state) == SaveActivity(7.0, training=True)
    assert observer.event_for(raw, state) is None  # the same record again
    ((method, args, fields),) = observer.log.calls
    assert (method, args[0]) == ("info", "restructured_in_process")
    assert fields["generation"] == 3 and fields["switch"] == 2 and fields["file"] == "switch_2.pt"
    assert fields["resumed_s"] == 0.12 and "at" not in fields
    assert "restructured in process" in observer.notifier.calls[0][1][0] and observer.dendrites == 0
    torn = records / "switch_4.json"
    torn.write_bytes(b"{not json")
    assert observer.event_for(RestructureRecorded(str(torn), now=8.0), state) is None


@pytest.mark.timeout(30)
@pytest.mark.parametrize("poll", [False, True], ids=["inotify", "poll"])
def test_the_watcher_reports_a_record_written_atomically_and_not_its_temp_file(tmp_path, poll):
    import queue

    from pai_launch.core.observations import RestructureRecorded
    from pai_launch.savefmt.atomic import write_atomically
    from pai_launch.supervise.folder.watcher import SaveFolderWatcher
    from tests.helpers import wait_until

    save, records = tmp_path / "PAI", tmp_path / "PAI" / ".pai-launch" / "restructures"
    records.mkdir(parents=True)
    seen = queue.SimpleQueue()
    watcher = SaveFolderWatcher(save, seen.put, poll=poll, records=records)
    watcher.start()
    try:
        write_atomically(records / "switch_2.json", _record())
        found = []

        def recorded():
            while not seen.empty():
                found.append(seen.get())
            return any(isinstance(o, RestructureRecorded) for o in found)

        wait_until(recorded, 20, interval=0.05, message="the record to be reported")
    finally:
        watcher.stop()
    paths = {o.path for o in found if isinstance(o, RestructureRecorded)}
    assert paths == {str(records / "switch_2.json")}


@pytest.mark.timeout(60)
def test_checksums_land_on_the_collective_device_whatever_device_each_parameter_is_on():
    """A restructured net on a GPU held an empty parameter: its zero was made on the CPU and stacking it beside the
    GPU's sums failed every in-process restructure. Here the meta device stands in for the GPU."""
    import torch

    net = torch.nn.Module()
    net.on_cpu = torch.nn.Parameter(torch.ones(3))
    net.empty = torch.nn.Parameter(torch.zeros(0, device="meta"))
    net.elsewhere = torch.nn.Parameter(torch.ones(2, device="meta"))
    sums = in_process.checksums(net, torch.device("meta"))
    assert sums.device.type == "meta" and tuple(sums.shape) == (6,)
