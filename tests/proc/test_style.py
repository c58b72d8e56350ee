"""Imports stay sorted as ruff's isort rule sorts them (configured in pyproject.toml), so a module's dependencies read
the same way everywhere: the standard library, third-party packages, then the project's own. Lines also stay within 120
characters (ruff's E501, at pyproject.toml's line-length)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.timeout(60)


def test_every_import_block_is_sorted():
    checked = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "I", "--no-cache", "supervisor",
                              "tests",
                              "scripts", "examples"], cwd=REPO, capture_output=True, text=True, timeout=50)
    assert checked.returncode == 0, f"unsorted imports (ruff check --select I --fix sorts them):\n{checked.stdout}"


def test_no_line_is_longer_than_120_characters():
    checked = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "E501", "--no-cache", "supervisor",
                              "tests", "scripts", "examples"], cwd=REPO, capture_output=True, text=True, timeout=50)
    assert checked.returncode == 0, ("lines longer than pyproject.toml's line-length (120): wrap them inside their "
                                     f"brackets, or split the string:\n{checked.stdout}")
