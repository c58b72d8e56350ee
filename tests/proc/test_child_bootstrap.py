"""The agent and the job store start as `python -c` with the package's folder first on their path, so they run this
very copy of pai-launch, installed or not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import pai_launch
from pai_launch.supervise.job import plan

pytestmark = pytest.mark.timeout(60)


def test_the_bootstrap_path_alone_imports_this_very_copy():
    """With site disabled (no installed pai-launch to fall back on) the bootstrap's folder alone must do."""
    bootstrap = (f"import sys; sys.path.insert(0, {plan.package_root()!r}); import pai_launch.wire.codec, pai_launch; "
                 "print(pai_launch.__file__)")
    found = subprocess.run([sys.executable, "-S", "-c", bootstrap], capture_output=True, text=True, timeout=50)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(Path(pai_launch.__file__).resolve())
