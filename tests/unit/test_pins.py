"""Every package of the test extra is pinned in scripts/constraints.txt and in the constraints of each other-torch
environment that installs the extra (tests/compat's own unit tier): a package left out of one is installed at
whatever version is newest that day, or, in an environment kept from before the extra grew, not at all."""

from __future__ import annotations

import importlib.metadata
import re

import pytest

from tests.compat.test_torch_versions import ENVIRONMENTS
from tests.helpers import REPO

pytestmark = pytest.mark.timeout(30)


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _pinned(path) -> set[str]:
    return {_name(line) for line in path.read_text().splitlines() if "==" in line and not line.startswith("#")}


TEST_EXTRA = {_name(r) for r in importlib.metadata.requires("pai-launch") or () if 'extra == "test"' in r}
FILES = [REPO / "scripts" / "constraints.txt"] + [
    REPO / "scripts" / "constraints" / f"torch-{env.torch}-py{env.python}.txt" for env in ENVIRONMENTS if env.own_tier]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_test_extra_is_pinned(path):
    assert {"pytest", "libcst"} <= TEST_EXTRA  # read from the installed metadata
    assert TEST_EXTRA - _pinned(path) == set()
