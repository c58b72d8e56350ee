"""Packaging: supervisord (PyPI `supervisor`, import name `supervisor`) and pai-launch (import name `pai_launch`,
source folder supervisor/) installed side by side in one environment, both working.

The test extra of pyproject.toml installs supervisord (pinned in scripts/constraints.txt), so a missing
supervisord is a broken test environment: these tests fail, they do not skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: The environment's scripts folder (not resolved: sys.executable is a venv symlink to the base Python).
BIN = Path(sys.executable).parent

#: Run in a subprocess whose working directory is a temporary folder, so the repo root is not on sys.path:
#: prints where each import name resolves, as JSON.
WHERE_SCRIPT = """
import importlib.metadata, json, os, site, sys
import supervisor, supervisor.supervisord
import pai_launch
print(json.dumps({
    "supervisor": supervisor.__file__,
    "supervisord_module": supervisor.supervisord.__file__,
    "supervisor_dist_version": importlib.metadata.version("supervisor"),
    "pai_launch": pai_launch.__file__,
    "site_packages": site.getsitepackages(),
    "sys_path": [os.path.abspath(entry) for entry in sys.path],  # "" (the working directory) made absolute
}))
"""


def _clean_env() -> dict[str, str]:
    """This environment without PYTHONPATH, so only what is installed in the venv decides the imports."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def _require_supervisord() -> Path:
    supervisord = BIN / "supervisord"
    if not supervisord.exists():
        pytest.fail(f"supervisord is not installed in {BIN} (the test extra of pyproject.toml needs the PyPI package "
                    f"'supervisor'): run ./scripts/test.sh, which installs it", pytrace=False)
    return supervisord


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=30)


@pytest.mark.timeout(60)
def test_supervisord_command_prints_its_version(tmp_path):
    supervisord = _require_supervisord()
    done = _run([str(supervisord), "--version"], cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    version = done.stdout.strip()
    assert version and version[0].isdigit() and "." in version, done.stdout  # e.g. "4.3.0"


@pytest.mark.timeout(60)
def test_pai_launch_command_prints_its_help(tmp_path):
    done = _run([str(BIN / "pai-launch"), "--help"], cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "pai-launch" in done.stdout, done.stdout
    assert "Usage" in done.stdout or "Example: pai-launch" in done.stdout, done.stdout


@pytest.mark.timeout(60)
def test_import_supervisor_is_supervisord_and_import_pai_launch_is_this_checkout(tmp_path):
    supervisord = _require_supervisord()
    done = _run([sys.executable, "-c", WHERE_SCRIPT], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    where = json.loads(done.stdout)
    assert str(REPO) not in where["sys_path"], where["sys_path"]  # the repo root is not importable from

    # `supervisor` is supervisord's package in site-packages, not this repo's supervisor/ source folder.
    supervisor_dir = Path(where["supervisor"]).resolve().parent
    assert any(supervisor_dir.is_relative_to(Path(site).resolve()) for site in where["site_packages"]), where
    assert not supervisor_dir.is_relative_to(REPO / "supervisor"), where
    assert Path(where["supervisord_module"]).resolve().parent == supervisor_dir, where
    # ... the same release the supervisord command is.
    version = _run([str(supervisord), "--version"], cwd=tmp_path).stdout.strip()
    assert where["supervisor_dist_version"] == version, (where, version)

    # `pai_launch` is this checkout's supervisor/pai_launch (the editable install).
    assert Path(where["pai_launch"]).resolve() == REPO / "supervisor" / "pai_launch" / "__init__.py", where
