"""README.md is a front page (what pai-launch is, the set-up commands, a first run, where to read on) and the manual in
docs/ holds the rest: the front page stays short, each page it links exists, and docs/index.md is the same page with
its links made relative to docs/."""

from __future__ import annotations

import re

import pytest

from tests.helpers import DOCS, REPO, docs_page

pytestmark = pytest.mark.timeout(30)

README = REPO / "README.md"
LINK = re.compile(r"\]\(([^)#]+)(#[^)]*)?\)")


def test_the_front_page_is_at_most_250_lines():
    lines = README.read_text().splitlines()
    assert 50 < len(lines) <= 250, len(lines)


def test_every_page_the_front_page_links_exists():
    targets = [m.group(1) for m in LINK.finditer(README.read_text()) if "://" not in m.group(1)]
    assert len(targets) > 25
    missing = [t for t in targets if not (REPO / t).is_file()]
    assert missing == []
    assert {t for t in targets if t.startswith("docs/")} == set(targets), "the front page links only the manual"


def test_the_front_page_gives_the_set_up_commands_and_where_to_read_on():
    text = README.read_text()
    for heading in ("## Quick start", "## A first run", "## What the first run of the test suite costs",
                    "## Where to read on"):
        assert heading in text
    assert "./scripts/demo.sh" in text and "./scripts/test.sh" in text


def test_the_manual_home_page_is_the_front_page():
    assert docs_page("index.md") == README.read_text().replace("](docs/", "](")


def test_every_page_the_front_page_links_is_in_the_manual():
    linked = {m.group(1).removeprefix("docs/") for m in LINK.finditer(README.read_text())}
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")} - {"index.md"}
    assert pages <= linked, pages - linked

