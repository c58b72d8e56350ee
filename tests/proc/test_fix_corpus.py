"""doctor --fix on the corpus of public projects: the table of the manual's doctor --fix page is what
scripts/fix_corpus.py computes today,
and fixing never touches the corpus's own files. It fixes 44 projects (about a minute), so it lives here rather than
in tests/unit, whose tier stays seconds and also runs under the newest torch."""

from __future__ import annotations

import hashlib
import re

import pytest

from tests.helpers import REPO, docs_page, load_script

pytestmark = pytest.mark.timeout(600)

CORPUS = REPO / "tests" / "doctor_scripts" / "corpus"


def _digest() -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(CORPUS.rglob("*")) if p.is_file())).hexdigest()


def test_the_doctor_fix_page_gives_the_table_the_fix_mode_makes_today_and_the_corpus_is_left_as_it_was():
    before = _digest()
    fix_corpus = load_script("fix_corpus")
    table = fix_corpus.table([fix_corpus.fix(p) for p in fix_corpus.projects()])
    assert _digest() == before
    shown = re.search(r"<!-- scripts/fix_corpus\.py -->\n(.*?)\n<!-- end -->", docs_page("users/doctor-fix.md"), re.S)
    assert shown, "docs/users/doctor-fix.md has no fix table"
    assert shown.group(1) == table
    assert "| **all 44** |" in table or re.search(r"\| \*\*all \d+\*\* \| \d+ \(\d+\) \| [1-9]\d* \|", table)
