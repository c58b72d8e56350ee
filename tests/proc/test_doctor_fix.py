"""`pai-launch doctor --fix` from the command line: FILE.orig kept (never overwritten), a file with uncommitted
changes in git refused with exit 3 unless --force, --diff changes nothing, a second --fix changes nothing, and the
exit codes of doctor for what is left."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.helpers import run_tool
from tests.unit.doctor_mutations import BASE, write_broken
from tests.unit.fix_projects import write_helper_project

pytestmark = pytest.mark.timeout(120)

GIT = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, env=GIT, check=True, capture_output=True, timeout=60,
                   stdin=subprocess.DEVNULL)


def test_fix_keeps_the_original_and_a_second_fix_changes_nothing(tmp_path):
    script = write_broken("no_flags", tmp_path, "train.py")
    broken = script.read_bytes()
    done = run_tool("doctor", "--fix", "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["the original is in train.py.orig",
                                        "fixed train.py: flag-perforate-model-parallel",
                                        "fixed train.py: flag-pai-load-folder", "2 fixes made; no problems left"]
    assert (tmp_path / "train.py.orig").read_bytes() == broken
    fixed = script.read_bytes()
    assert run_tool("doctor", "train.py", cwd=tmp_path).returncode == 0

    again = run_tool("doctor", "--fix", "train.py", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.splitlines() == ["nothing to fix; no problems left"], again.stdout
    assert script.read_bytes() == fixed and (tmp_path / "train.py.orig").read_bytes() == broken


def test_an_existing_orig_is_kept_and_said_so(tmp_path):
    write_broken("ddp_find_unused", tmp_path, "train.py")
    (tmp_path / "train.py.orig").write_text("mine\n")
    done = run_tool("doctor", "--fix", "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "the original is kept as it was in train.py.orig" in done.stdout.splitlines()
    assert (tmp_path / "train.py.orig").read_text() == "mine\n"


def test_errors_left_exit_1_and_each_says_why(tmp_path):
    write_broken("plain_optimizer", tmp_path, "train.py")
    done = run_tool("doctor", "--fix", "train.py", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.splitlines() == ["left train.py:45: error[optimizer-not-from-tracker] no mechanical fix",
                                        "nothing to fix; 1 error left"], done.stdout


def test_diff_changes_nothing(tmp_path):
    script = write_broken("capacity_test_late", tmp_path, "train.py")
    broken = script.read_bytes()
    done = run_tool("doctor", "--diff", "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("--- train.py\n+++ train.py\n@@ ")
    assert "+GPA.pc.set_testing_dendrite_capacity(False)\n" in done.stdout
    assert script.read_bytes() == broken and sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]
    patched = tmp_path / "patched"
    patched.mkdir()
    (patched / "train.py").write_bytes(broken)
    subprocess.run(["patch", "-p0", "-s"], cwd=patched, input=done.stdout, text=True, check=True, timeout=60)
    assert (patched / "train.py").read_text() == BASE.read_text().replace(
        "model = in_turn(", "GPA.pc.set_testing_dendrite_capacity(False)\nmodel = in_turn(")


def test_a_file_with_uncommitted_changes_is_refused_unless_force(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "train.py").write_text(BASE.read_text())
    git(tmp_path, "add", "train.py")
    git(tmp_path, "commit", "-qm", "good")
    script = write_broken("ddp_broadcast_buffers", tmp_path, "train.py")
    broken = script.read_bytes()
    refused = run_tool("doctor", "--fix", "train.py", cwd=tmp_path)
    assert refused.returncode == 3 and refused.stdout == ""
    assert refused.stderr.splitlines() == [("pai-launch: error: train.py has uncommitted changes: commit them, or "
                                            "pass --force (the original is kept as FILE.orig either way)")]
    assert script.read_bytes() == broken and not (tmp_path / "train.py.orig").exists()

    forced = run_tool("doctor", "--fix", "--force", "train.py", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert script.read_text() == BASE.read_text()

    # committed, a file is fixed without --force (train.py.orig, untracked, is no file to change)
    write_broken("ddp_find_unused", tmp_path, "train.py")
    git(tmp_path, "commit", "-qam", "broken again")
    assert run_tool("doctor", "--fix", "train.py", cwd=tmp_path).returncode == 0
    assert "(model, broadcast_buffers=False, find_unused_parameters=True)" in script.read_text()


@pytest.mark.parametrize("args, problem", [
    (("--fix", "missing.py"), "missing.py"),
    (("--fix", "--json", "train.py"), "--json cannot be combined with --fix or --diff"),
    (("--force", "train.py"), "--force is for --fix"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, problem):
    write_broken("no_flags", tmp_path, "train.py")
    done = run_tool("doctor", *args, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("pai-launch: error: ") and problem in line


def test_a_helper_is_fixed_beside_its_own_orig(tmp_path):
    script_path, helper = write_helper_project(tmp_path)
    script = script_path.read_bytes()
    done = run_tool("doctor", "--fix", "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["the original is in utils/ddp.py.orig",
                                        "fixed utils/ddp.py: ddp-broadcast-buffers",
                                        "1 fix made; no problems left"]
    assert "(model, find_unused_parameters=True, broadcast_buffers=False)\n" in helper.read_text()
    assert (tmp_path / "train.py").read_bytes() == script and not (tmp_path / "train.py.orig").exists()
