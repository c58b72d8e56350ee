"""doctor on any input: what is not a regular file, too large, a symlink loop, unreadable or binary is one line and
exit 2, in bounded time and memory (never opened, or read with a bounded read); a project file it imports that is
such is skipped with a note; and a launch's own check gives up after its time budget and the launch goes on."""

from __future__ import annotations

import errno
import itertools
import json
import os
import queue
import sys
from pathlib import Path

import pytest

from pai_launch.cli import beforerun, startup, tools
from pai_launch.doctor import source
from pai_launch.doctor.budget import Deadline, OutOfTime
from pai_launch.doctor.diagnose import check_script, render_text
from pai_launch.placement.spec import LaunchSpec
from pai_launch.wire import log_events

pytestmark = pytest.mark.timeout(60)

GOOD = Path(__file__).resolve().parents[1] / "doctor_scripts" / "good" / "minimal_ddp.py"


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _loop(path: Path) -> None:
    other = path.with_name("other.py")
    path.symlink_to(other.name)
    other.symlink_to(path.name)


def _too_big(path: Path) -> None:
    with open(path, "wb") as f:  # sparse: no data written
        f.truncate(source.MAX_SOURCE_BYTES + 1)


def _device(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _directory(path: Path) -> None:
    path.mkdir()


def _binary(path: Path) -> None:
    path.write_bytes(b"import torch\n\x00\x01\x02\x7fELF")


def _latin1(path: Path) -> None:
    path.write_bytes(b"# caf\xe9\nimport torch\n")


#: how to make a path that doctor must refuse -> what its one line says
REFUSED = {
    "fifo": (_fifo, "cannot read: a named pipe (FIFO), not a regular file; name the training script's .py file"),
    "symlink-loop": (_loop, "cannot read: a symlink loop (too many levels of symbolic links)"),
    "too-big": (_too_big, f"cannot read: {source.MAX_SOURCE_BYTES + 1} bytes, over doctor's limit of 1 MiB of source"),
    "dev-zero": (_device, "cannot read: a character device, not a regular file"),
    "directory": (_directory, "cannot read: a directory, not a regular file"),
    "binary": (_binary, "not Python source: binary content (a NUL byte at offset 13)"),
    "not-utf8": (_latin1, "not UTF-8 text (byte 0xe9 at offset 5); save it as UTF-8"),
}


def _one_error_line(capsys) -> str:
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_doctor_refuses_each_kind_of_bad_input_in_one_line_with_exit_2(kind, tmp_path, capsys):
    make, says = REFUSED[kind]
    script = tmp_path / "train.py"
    make(script)
    assert tools.run_tool(["doctor", str(script)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"pai-launch: error: {script}: {says}"), line


def test_dev_zero_itself_is_refused_by_its_stat(capsys):
    assert tools.run_tool(["doctor", "/dev/zero"]) == 2
    assert _one_error_line(capsys) == ("pai-launch: error: /dev/zero: cannot read: a character device, not a regular "
                                       "file; name the training script's .py file")


def test_a_fifo_is_never_opened(tmp_path, monkeypatch):
    """Opening a FIFO blocks until a writer comes: the stat decides before any open."""
    fifo = tmp_path / "train.py"
    os.mkfifo(fifo)
    opened = []
    monkeypatch.setattr(source.os, "open", lambda *args, **kwargs: opened.append(args) or -1)
    with pytest.raises(source.Unreadable, match="named pipe"):
        check_script(fifo)
    assert opened == []


def test_a_file_it_may_not_read_is_one_line(tmp_path, capsys, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text("import torch\n")

    def refuse(path, flags, *args):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(source.os, "open", refuse)  # as root, chmod 000 would not stop the read
    assert tools.run_tool(["doctor", str(script)]) == 2
    assert _one_error_line(capsys) == (f"pai-launch: error: {script}: cannot read: permission denied; make it "
                                       "readable (chmod u+r) or run as its owner")


def test_the_read_is_bounded_even_where_the_size_is_not_known(monkeypatch):
    """/proc files are regular with a size of 0: the read stops one byte past the limit, never reading it all."""
    monkeypatch.setattr(source, "MAX_SOURCE_BYTES", 64)
    asked = []
    real_read = os.read
    monkeypatch.setattr(source.os, "read", lambda fd, n: asked.append(n) or real_read(fd, n))
    assert os.stat("/proc/self/status").st_size == 0
    with pytest.raises(source.Unreadable, match="cannot read: more than 64 bytes, over doctor's limit"):
        source.read_source("/proc/self/status")
    assert sum(asked) <= 65


def test_a_file_at_the_limit_is_read(tmp_path):
    script = tmp_path / "train.py"
    script.write_bytes(b"#" * (source.MAX_SOURCE_BYTES - 1) + b"\n")
    assert len(source.read_source(script)) == source.MAX_SOURCE_BYTES


@pytest.mark.parametrize("kind", ["fifo", "symlink-loop", "too-big", "dev-zero", "binary", "not-utf8"])
def test_a_project_file_that_cannot_be_read_is_skipped_with_a_note(kind, tmp_path):
    make, says = REFUSED[kind]
    helper = tmp_path / "helpers.py"
    make(helper)
    script = tmp_path / "train.py"
    script.write_text(GOOD.read_text().replace("import torch\n", "import torch\nimport helpers\n", 1))
    report = check_script(script)
    assert report.findings == ()
    skipped = [note for note in report.notes if note.startswith("skipped ")]
    assert len(skipped) == 1 and skipped[0].startswith(f"skipped {helper}: {says}"), report.notes
    assert f"\nnote: skipped {helper}: " in "\n" + render_text(report)
    assert str(helper) not in report.files


def test_the_budget_gives_up_between_statements_on_a_fake_clock():
    ticks = itertools.count()
    with pytest.raises(OutOfTime, match=r"^doctor gave up after 25 s$"):
        check_script(GOOD, deadline=Deadline(25, clock=lambda: next(ticks)))
    assert next(ticks) == 26  # asked again and again, and stopped at the first check past the budget
    frozen = Deadline(25, clock=lambda: 0.0)
    assert check_script(GOOD, deadline=frozen).findings == ()  # a clock that never moves: the whole check runs


def _launch_spec(tmp_path: Path) -> LaunchSpec:
    (tmp_path / "train.py").write_text(GOOD.read_text())
    return LaunchSpec(script=Path("train.py"), workdir=tmp_path, python=sys.executable, dry_run=True,
                      log_format="json")


def test_the_launchs_check_gives_up_in_one_warning_and_the_spec_goes_on(tmp_path):
    spec, notes = beforerun.check_script(_launch_spec(tmp_path), deadline=Deadline(0))
    assert [event for event, _fields in notes] == [log_events.SCRIPT_CHECK_GAVE_UP]
    fields = notes[0][1]
    assert fields["script"] == "train.py" and fields["budget_s"] == 0
    assert "doctor gave up after 0 s" in fields["hint"] and "starting anyway" in fields["hint"]
    assert "pai-launch doctor train.py" in fields["hint"]
    assert spec.resume_from == "switch"  # the default, with no stage read


def test_a_script_the_check_cannot_read_or_parse_is_one_warning_and_a_bug_in_the_check_another(tmp_path, monkeypatch):
    spec = _launch_spec(tmp_path)
    (tmp_path / "train.py").write_text("def broken(:\n")
    _spec, notes = beforerun.check_script(spec)
    assert [event for event, _fields in notes] == [log_events.SCRIPT_CHECK_FAILED]
    assert notes[0][1]["hint"] == "the script will likely fail to start" and "train.py" in notes[0][1]["error"]

    from pai_launch.doctor import diagnose

    def bug(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(diagnose, "check_script", bug)
    _spec, notes = beforerun.check_script(_launch_spec(tmp_path))
    assert notes[0][1]["error"] == "KeyError: 'a bug'" and "--no-doctor" in notes[0][1]["hint"]


def test_a_launch_whose_check_runs_out_of_time_still_starts(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(beforerun, "DOCTOR_BUDGET_S", 0.0)
    code = startup.launch_run(_launch_spec(tmp_path), {}, (), queue.SimpleQueue())
    out, err = capsys.readouterr()
    assert code == 0, err
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    gave_up = [e for e in events if e["event"] == "script_check_gave_up"]
    assert len(gave_up) == 1 and gave_up[0]["level"] == "warning", err
    assert "--perforate_model_parallel" in out  # the dry run's plan: the launch went on
