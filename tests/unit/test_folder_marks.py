"""A tier's marks come from its folder (tests/conftest.py's FOLDER_MARKS): a file that writes them again in its own
pytestmark only repeats what a reader must then check is the same."""

from __future__ import annotations

import re

import pytest

from tests.conftest import FOLDER_MARKS, TESTS

pytestmark = pytest.mark.timeout(30)


def test_no_test_file_repeats_the_marks_its_folder_gives():
    repeated = []
    for folder, marks in FOLDER_MARKS.items():
        for path in sorted((TESTS / folder).glob("*.py")):
            for line in path.read_text().splitlines():
                if line.startswith("pytestmark") and set(re.findall(r"pytest\.mark\.(\w+)\b(?!\()", line)) & set(marks):
                    repeated.append(f"{folder}/{path.name}: {line}")
    assert repeated == []
