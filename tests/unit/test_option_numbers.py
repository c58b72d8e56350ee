"""Every option in seconds is finite and in range, checked by preflight and through the real command line:
one line naming the option, the value and a good one; exit 2; nothing launched."""

import queue
from pathlib import Path

import pytest

from pai_launch.cli import declared, specbuilder, startup
from pai_launch.cli import launch as cli
from pai_launch.cli.preflight import preflight
from pai_launch.placement import seconds
from pai_launch.placement.nodes import Nodes
from pai_launch.placement.spec import LaunchSpec, PreflightError

pytestmark = pytest.mark.timeout(30)

#: option -> (LaunchSpec field, values refused); 0 is refused only where no time at all makes no sense.
BAD = {
    "--grace": ("grace", ["nan", "inf", "-inf", "-1", "1e9"]),
    "--backoff": ("backoff", ["nan", "inf", "-1"]),
    "--backoff-max": ("backoff_max", ["nan", "inf", "-1", "1e9"]),
    "--stall-timeout": ("stall_timeout", ["nan", "inf", "-1", "0"]),
    "--rdzv-timeout": ("rdzv_timeout", ["nan", "inf", "-1", "0"]),
    "--fs-settle": ("fs_settle", ["nan", "inf", "-1", "1e9"]),
}
CASES = [(option, value) for option, (_, values) in BAD.items() for value in values]


def test_every_seconds_option_has_a_range():
    assert set(seconds.RANGES) == {*BAD, "--interval", "--timeout"}


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "1e9"])
def test_status_refuses_a_bad_redraw_interval_in_one_line(capsys, tmp_path, monkeypatch, value):
    from pai_launch.cli import tools

    monkeypatch.chdir(tmp_path)
    assert tools.run_tool(["status", "--watch", "--interval", value]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"pai-launch: error: --interval {float(value):g} ") and "e.g. --interval 2" in line, line


def _spec(tmp_path, field, value):
    (tmp_path / "train.py").write_text("")
    base = dict(script=Path("train.py"), workdir=tmp_path, python="/py", dry_run=True)
    if field == "rdzv_timeout":
        return LaunchSpec(**base, nodes=Nodes(rdzv_timeout=value))
    if field == "backoff":  # --backoff-max at its own highest, so --backoff's own range is what is checked
        return LaunchSpec(**base, backoff=value, backoff_max=seconds.RANGES["--backoff-max"].high)
    return LaunchSpec(**base, **{field: value})


@pytest.mark.parametrize("option, value", CASES)
def test_preflight_refuses_a_bad_number_of_seconds(tmp_path, option, value):
    field = BAD[option][0]
    with pytest.raises(PreflightError) as caught:
        preflight(_spec(tmp_path, field, float(value)), chosen_nproc=None, env={}, physical=0)
    text = str(caught.value)
    assert "\n" not in text and text.startswith(f"{option} {float(value):g} ") and f"e.g. {option} " in text, text


@pytest.mark.parametrize("option", BAD)
def test_preflight_accepts_the_example_and_the_bounds(tmp_path, option):
    field, bounds = BAD[option][0], seconds.RANGES[option]
    for value in (float(bounds.example), bounds.high, *([0.0] if bounds.zero_ok else [])):
        if field == "backoff_max" and value == 0.0:
            continue  # below the default --backoff 1, refused for that reason
        preflight(_spec(tmp_path, field, value), chosen_nproc=None, env={}, physical=0)


@pytest.fixture
def launched(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for name in ("GRACE", "BACKOFF", "BACKOFF_MAX", "STALL_TIMEOUT", "RDZV_TIMEOUT", "FS_SETTLE"):
        monkeypatch.delenv(declared.ENV_PREFIX + name, raising=False)
    monkeypatch.setattr(specbuilder, "physical_gpu_count", lambda: 0)
    calls = []
    monkeypatch.setattr(startup, "launch_run", lambda *args: calls.append(args) or 0)
    return calls


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("option, value", CASES)
def test_the_command_line_refuses_it_with_exit_2_and_launches_nothing(launched, capsys, option, value):
    code = cli.run_command_line([f"{option}={value}", "train.py"], queue.SimpleQueue())
    line = _one_error_line(capsys)
    assert code == 2 and launched == []
    assert line.startswith(f"pai-launch: error: {option} {float(value):g} ") and f"e.g. {option} " in line, line


@pytest.mark.parametrize("option", BAD)
def test_the_environment_form_is_checked_the_same(launched, capsys, monkeypatch, option):
    monkeypatch.setenv(declared.ENV_PREFIX + option[2:].upper().replace("-", "_"), "nan")
    code = cli.run_command_line(["train.py"], queue.SimpleQueue())
    line = _one_error_line(capsys)
    assert code == 2 and launched == [] and line.startswith(f"pai-launch: error: {option} nan "), line


def test_good_values_still_launch(launched):
    argv = ["--grace", "0", "--backoff", "0", "--backoff-max", "0", "--stall-timeout", "0.5", "--rdzv-timeout", "1",
            "--fs-settle", "0", "train.py"]
    assert cli.run_command_line(argv, queue.SimpleQueue()) == 0
    assert len(launched) == 1
