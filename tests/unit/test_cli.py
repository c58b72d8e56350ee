"""The command line maps onto a LaunchSpec exactly; errors are one line and exit 2."""

import queue

import pytest

from pai_launch.cli import launch as cli
from pai_launch.cli import specbuilder, startup
from pai_launch.placement.spec import LaunchSpec, policy_for


@pytest.fixture
def launched(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(specbuilder, "physical_gpu_count", lambda: 0)
    seen = {}

    def fake_launch(spec, env, visible, inbox, notes=()):
        seen["spec"] = spec
        seen["inbox"] = inbox
        seen["notes"] = notes
        return 0

    monkeypatch.setattr(startup, "launch_run", fake_launch)
    return seen


def run(argv, inbox=None):
    return cli.run_command_line(argv, inbox if inbox is not None else queue.SimpleQueue())


def test_the_signal_inbox_reaches_the_command_through_typers_context(launched):
    inbox = queue.SimpleQueue()
    assert run(["train.py"], inbox) == 0
    assert launched["inbox"] is inbox


def test_the_spec_takes_the_working_directory_and_interpreter_explicitly(launched, tmp_path):
    import sys

    assert run(["train.py"]) == 0
    assert launched["spec"].workdir == tmp_path and launched["spec"].python == sys.executable
    with pytest.raises(TypeError):
        LaunchSpec(script=tmp_path / "train.py")  # no defaults taken from the process


def test_a_bug_becomes_exit_70_with_one_line_saying_so(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    monkeypatch.setattr(specbuilder, "physical_gpu_count", lambda: 0)

    def broken_launch(spec, env, visible, inbox, notes=()):
        raise KeyError("injected")

    monkeypatch.setattr(startup, "launch_run", broken_launch)
    assert run(["train.py"]) == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "KeyError: 'injected'" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("pai-launch: error: internal error (KeyError: 'injected'): a bug in pai-launch, exit code "
                           "70")


def test_everything_after_script_belongs_to_the_script(launched):
    assert run(["--nproc", "2", "train.py", "--nproc", "9", "--lr=1", "-h"]) == 0
    spec = launched["spec"]
    assert spec.nproc == 2 and spec.script_args == ("--nproc", "9", "--lr=1", "-h")


def test_defaults(launched):
    assert run(["train.py"]) == 0
    spec = launched["spec"]
    assert (spec.nproc, spec.save_name, spec.adopt_save_folder, spec.grace, spec.gpus) == (1, "PAI", True, 30.0, None)
    assert spec.log_format == "auto" and not (spec.poll or spec.reinit or spec.data_parallel or spec.dry_run)


def test_nproc_per_node_alias_and_every_option(launched, tmp_path):
    argv = ["--nproc-per-node", "1", "--save-name", "OUT", "--grace", "5", "--log-format", "json", "--log-dir", "logs",
            "--poll", "--reinit", "--dry-run", "train.py"]
    assert run(argv) == 0
    spec = launched["spec"]
    assert (spec.nproc, spec.save_name, spec.adopt_save_folder, spec.grace) == (1, "OUT", False, 5.0)
    assert spec.log_dir == tmp_path / "logs" and spec.poll and spec.reinit and spec.dry_run


def test_fault_options(launched):
    argv = ["--max-failures", "5", "--backoff", "0.5", "--backoff-max", "8", "--stall-timeout", "600", "--fresh",
            "train.py"]
    assert run(argv) == 0
    spec = launched["spec"]
    assert (spec.max_failures, spec.backoff, spec.backoff_max, spec.stall_timeout,
            spec.fresh) == (5, 0.5, 8.0, 600.0, True)
    assert spec.retries_requested
    assert policy_for(spec, {}).retry_repeats, "an explicit --max-failures retries a repeated crash up to it"


def test_fault_option_defaults(launched):
    assert run(["train.py"]) == 0
    spec = launched["spec"]
    assert (spec.max_failures, spec.backoff, spec.backoff_max, spec.stall_timeout,
            spec.fresh) == (3, 1.0, 60.0, None, False)
    assert not spec.retries_requested and not policy_for(spec, {}).retry_repeats


def test_gpus_without_a_driver_sets_the_list_and_default_nproc(launched):
    assert run(["--gpus", "0,1", "train.py"]) == 0
    assert launched["spec"].gpus == ("0", "1") and launched["spec"].nproc == 2


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--bogus", "train.py"], "No such option: --bogus"),
        ([], "Missing argument"),
        (["--nproc", "zero", "train.py"], "Invalid value for '--nproc'"),
        (["--nproc", "0", "train.py"], "less than 1"),
        (["missing.py"], "does not exist"),
        (["--gpus", "0,0", "train.py"], "names a GPU twice"),
        (["--max-failures", "0", "train.py"], "--max-failures 0 is less than 1"),
        (["--backoff", "5", "--backoff-max", "1", "train.py"], "--backoff-max"),
        (["--stall-timeout", "0", "train.py"], "--stall-timeout 0 is not a number of seconds"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(launched, capsys, argv, message):
    assert run(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pai-launch: error: ") and message in err and "\n" not in err
    assert "spec" not in launched


def test_version_and_help(launched, capsys):
    assert run(["--version"]) == 0
    assert "pai-launch 0.1.0" in capsys.readouterr().out
    assert run(["-h"]) == 0
    out = capsys.readouterr().out
    assert "Example: pai-launch --nproc 8 train.py" in out and "Exit codes" in out and "--nproc-per-node" in out


ENV_SETTINGS = {
    "PAI_LAUNCH_NPROC": "3", "PAI_LAUNCH_SAVE_NAME": "OUT", "PAI_LAUNCH_GPUS": "0,1,2", "PAI_LAUNCH_GRACE": "7",
    "PAI_LAUNCH_LOG_FORMAT": "json", "PAI_LAUNCH_LOG_DIR": "logs", "PAI_LAUNCH_POLL": "1", "PAI_LAUNCH_REINIT": "true",
    "PAI_LAUNCH_DRY_RUN": "yes", "PAI_LAUNCH_MAX_FAILURES": "5", "PAI_LAUNCH_BACKOFF": "0.5",
    "PAI_LAUNCH_BACKOFF_MAX": "9", "PAI_LAUNCH_STALL_TIMEOUT": "600",
}


def test_every_option_can_come_from_a_pai_launch_environment_variable(launched, monkeypatch, tmp_path):
    for key, value in ENV_SETTINGS.items():
        monkeypatch.setenv(key, value)
    assert run(["train.py"]) == 0
    spec = launched["spec"]
    assert (spec.nproc, spec.save_name, spec.adopt_save_folder, spec.gpus,
            spec.grace) == (3, "OUT", False, ("0", "1", "2"), 7.0)
    assert (spec.log_format, spec.log_dir, spec.poll, spec.reinit, spec.dry_run) == ("json", tmp_path / "logs", True,
                                                                                     True, True)
    assert (spec.max_failures, spec.retries_requested, spec.backoff, spec.backoff_max,
            spec.stall_timeout) == (5, True, 0.5, 9.0, 600.0)


def test_data_parallel_from_the_environment(launched, monkeypatch):
    monkeypatch.setenv("PAI_LAUNCH_DATA_PARALLEL", "1")
    assert run(["train.py"]) == 0
    assert launched["spec"].data_parallel


def test_the_command_line_wins_over_the_environment(launched, monkeypatch):
    monkeypatch.setenv("PAI_LAUNCH_NPROC", "3")
    monkeypatch.setenv("PAI_LAUNCH_GRACE", "7")
    assert run(["--nproc", "1", "--grace", "2", "train.py"]) == 0
    assert (launched["spec"].nproc, launched["spec"].grace) == (1, 2.0)


def test_fresh_is_never_taken_from_the_environment(launched, monkeypatch):
    monkeypatch.setenv("PAI_LAUNCH_FRESH", "1")  # a service restarted with it would move its save folder aside each
    # time
    assert run(["train.py"]) == 0
    assert not launched["spec"].fresh


@pytest.mark.parametrize("key, value, option", [("PAI_LAUNCH_NPROC", "zz", "--nproc"),
                                                ("PAI_LAUNCH_POLL", "maybe", "--poll"),
                                                ("PAI_LAUNCH_NPROC", "0", "less than 1")])
def test_a_bad_environment_value_is_one_line_naming_it_and_exit_2(launched, monkeypatch, capsys, key, value, option):
    monkeypatch.setenv(key, value)
    assert run(["train.py"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pai-launch: error: ") and option in err and "\n" not in err
    if option.startswith("--"):
        assert key in err
    assert "spec" not in launched


def test_help_names_the_environment_variable_of_every_option_but_fresh(launched, capsys):
    assert run(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for key in [*ENV_SETTINGS, "PAI_LAUNCH_DATA_PARALLEL"]:
        assert key in out, key
    assert "PAI_LAUNCH_FRESH" not in out
