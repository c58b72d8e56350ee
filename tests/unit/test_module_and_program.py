"""-m MODULE and --no-python, as torchrun has them: the commands planned, the module's file found without importing
it, the program found on PATH, warm workers given the module, and the checks before a run. Pure: no process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pai_launch.agent import generation, warmpool
from pai_launch.cli import scriptfile, specbuilder
from pai_launch.forkserver import worker_main
from pai_launch.placement.spec import MODULE, PROGRAM, SCRIPT, LaunchSpec, PreflightError
from pai_launch.supervise.job import plan
from pai_launch.wire import log_events
from tests.unit.test_specbuilder import host, typed


def spec(tmp_path: Path, script: str, runs_as: str, **overrides) -> LaunchSpec:
    return LaunchSpec(script=Path(script), script_text=script, workdir=tmp_path, python="/py",
                      script_args=("--lr", "1"),
                      runs_as=runs_as, **overrides)


# --- the commands --------------------------------------------------------------------------------------------------
def test_a_module_runs_as_python_dash_m_in_every_phase(tmp_path):
    s = spec(tmp_path, "pkg.train", MODULE)
    assert plan.init_command(s, "RID", ()).argv == ("/py", "-u", "-m", "pkg.train", "--perforate_model_parallel",
                                                    "--lr", "1")
    assert plan.worker_command(s, "PAI") == ("/py", "-u", "-m", "pkg.train", "--lr", "1", "--pai_load_folder", "PAI")
    assert plan.data_parallel_command(s, "RID", 1).argv == ("/py", "-u", "-m", "pkg.train", "--lr", "1")
    request = plan.generation_request(s, "RID", 1, None, {}, "/logs")
    assert (request.python, request.args, request.no_python) == ("/py", ("-u", "-m", "pkg.train", "--lr", "1"), False)


def test_a_program_runs_without_the_interpreter_in_every_phase(tmp_path):
    s = spec(tmp_path, "bin/train.sh", PROGRAM)
    assert plan.init_command(s, "RID", ()).argv == ("bin/train.sh", "--perforate_model_parallel", "--lr", "1")
    assert plan.worker_command(s, None) == ("bin/train.sh", "--lr", "1")
    request = plan.generation_request(s, "RID", 2, "PAI", {}, "/logs")
    assert (request.python, request.no_python) == ("/py", True)
    assert request.args == ("bin/train.sh", "--lr", "1", "--pai_load_folder", "PAI")
    described = "\n".join(plan.describe(s, "RID", (), {}, needs_init=True, resume_folder=None))
    assert "command: bin/train.sh --perforate_model_parallel --lr 1" in described
    assert "command: bin/train.sh --lr 1\n" in described


def test_a_cold_workers_command_is_the_program_itself_under_the_parent_death_wrapper(tmp_path):
    request = plan.generation_request(spec(tmp_path, "/bin/prog", PROGRAM), "RID", 1, None, {}, "/logs")
    entry, args = generation._entrypoint(request, None)
    assert entry == "/py" and args[:2] == ("-S", "-c") and args[4:] == ("/bin/prog", "--lr", "1")
    request = plan.generation_request(spec(tmp_path, "m", MODULE), "RID", 1, None, {}, "/logs")
    assert generation._entrypoint(request, None)[1][4:] == ("/py", "-u", "-m", "m", "--lr", "1")


# --- the spec -----------------------------------------------------------------------------------------------------
def test_module_and_no_python_choose_how_the_script_runs_and_a_program_starts_cold_with_a_note():
    assert build(module=True).spec.runs_as == MODULE and build().spec.runs_as == SCRIPT
    built = build(no_python=True)
    assert (built.spec.runs_as, built.spec.cold) == (PROGRAM, True)
    [(event, fields)] = built.notes
    assert event == log_events.TORCHRUN_FLAG_MAPPED and event.fields >= set(fields) and fields["flag"] == "--no-python"
    assert build(no_python=True, cold=True).notes == []
    with pytest.raises(PreflightError, match="-m/--module and --no-python cannot be used together"):
        build(module=True, no_python=True)


def build(**options):
    return specbuilder.build(typed(**options), host())


# --- finding what runs ----------------------------------------------------------------------------------------------
@pytest.fixture
def project(tmp_path):
    """pkg/ with train.py and __main__.py, an __init__ that must never run, and lone.py."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    (package / "train.py").write_text("")
    (package / "__main__.py").write_text("")
    (package / "sub").mkdir()
    (package / "sub" / "__init__.py").write_text("")
    (tmp_path / "lone.py").write_text("")
    return tmp_path


@pytest.mark.parametrize("name, file", [("pkg.train", "pkg/train.py"), ("pkg", "pkg/__main__.py"), ("lone", "lone.py"),
                                        ("pkg.sub", None), ("pkg.nope", None), ("nope", None), ("lone.x", None),
                                        ("bad-name", None)])
def test_a_modules_file_is_found_from_the_working_directory_without_importing_it(project, name, file):
    found = scriptfile.module_file(name, project)
    assert found == (None if file is None else project / file)
    assert not (project / "imported").exists()


def test_an_installed_module_is_found_on_this_pythons_path(tmp_path):
    assert scriptfile.module_file("json.tool", tmp_path).name == "tool.py"


def test_a_missing_module_is_one_line_naming_it(project):
    scriptfile.check_exists(spec(project, "pkg.train", MODULE), {})
    with pytest.raises(PreflightError, match=r"-m pkg.nope: no such module from .* give the script's path without -m"):
        scriptfile.check_exists(spec(project, "pkg.nope", MODULE), {})


def test_doctor_reads_the_modules_file_and_nothing_for_a_program(project):
    assert scriptfile.python_file(spec(project, "pkg", MODULE)) == project / "pkg" / "__main__.py"
    assert scriptfile.python_file(spec(project, "lone.py", SCRIPT)) == project / "lone.py"
    assert scriptfile.python_file(spec(project, "lone.py", PROGRAM)) is None


def test_a_program_must_be_on_path_or_an_executable_file(tmp_path):
    program = tmp_path / "bin" / "train.sh"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    with pytest.raises(PreflightError, match="--no-python bin/train.sh is not executable: chmod"):
        scriptfile.check_exists(spec(tmp_path, "bin/train.sh", PROGRAM), {})
    program.chmod(0o755)
    scriptfile.check_exists(spec(tmp_path, "bin/train.sh", PROGRAM), {})
    scriptfile.check_exists(spec(tmp_path, "train.sh", PROGRAM), {"PATH": str(program.parent)})
    with pytest.raises(PreflightError, match="--no-python train.sh: no such program on PATH"):
        scriptfile.check_exists(spec(tmp_path, "train.sh", PROGRAM), {"PATH": "/nonexistent"})
    with pytest.raises(PreflightError, match="--no-python bin/gone is not a file"):
        scriptfile.check_exists(spec(tmp_path, "bin/gone", PROGRAM), {})


def test_a_program_given_as_dot_slash_is_that_file_never_one_on_path(tmp_path):
    program = tmp_path / "prog"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    dotted = spec(tmp_path, "./prog", PROGRAM)
    scriptfile.check_exists(dotted, {"PATH": "/nonexistent"})  # not looked up on PATH
    assert plan.worker_command(dotted, None) == ("./prog", "--lr", "1")
    assert plan.worker_command(spec(tmp_path, "prog", PROGRAM), None)[0] == "prog", "a bare name: PATH's"


# --- warm workers -------------------------------------------------------------------------------------------------
def test_a_warm_workers_spec_for_a_module_is_python_dash_ms(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pool = warmpool.WarmPool(preload=(), cold_path=("/lib",))
    request = plan.generation_request(spec(tmp_path, "pkg.train", MODULE), "RID", 1, None, {}, "/logs")
    made = pool.worker_spec(request, "/records")
    assert (made["module"], made["argv"], made["unbuffered"]) == ("pkg.train", ["-m", "--lr", "1"], True)
    assert made["sys_path"] == ([str(tmp_path), "/lib"] if not sys.flags.safe_path else ["/lib"])
    script = plan.generation_request(spec(tmp_path, "/s/train.py", SCRIPT), "RID", 1, None, {}, "/logs")
    assert pool.worker_spec(script, "/records")["module"] is None


def test_a_module_runs_as_main_with_its_file_as_argv0_and_its_exit_code(tmp_path, monkeypatch):
    (tmp_path / "probe_mod.py").write_text(
        "import sys\nopen(sys.argv[1], 'w').write(__name__ + ' ' + sys.argv[0])\nsys.exit(int(sys.argv[2]))\n")
    out = tmp_path / "out"
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["-m", str(out), "3"])
    assert worker_main._run_module("probe_mod") == 3
    assert out.read_text() == f"__main__ {tmp_path / 'probe_mod.py'}"
    assert worker_main._module_file("probe_mod") == str(tmp_path / "probe_mod.py")
    assert worker_main._module_file("no_such_module_here") == ""
    assert os.path.basename(worker_main._module_file("json")) == "__main__.py" or worker_main._module_file("json") == ""


def test_a_worker_of_a_server_that_held_no_signal_leaves_its_signal_mask_as_it_is():
    # Only an armed forkserver holds the stop signals; a fork of any other leaves the mask it was given alone.
    import signal
    from types import SimpleNamespace

    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
    try:
        assert worker_main._release_held_signals(SimpleNamespace(MASK_BEFORE=None)) is None
        assert worker_main._release_held_signals(None) is None
        assert signal.SIGUSR2 in signal.pthread_sigmask(signal.SIG_BLOCK, [])
        assert worker_main._release_held_signals(SimpleNamespace(MASK_BEFORE=frozenset(blocked))) is None
        assert signal.SIGUSR2 not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
