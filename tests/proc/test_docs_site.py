"""The manual builds: `mkdocs build --strict` (mkdocs.yml) makes the site from docs/ with no warning, which fails on a
link to a page, a file or an anchor that is not there, and every page in docs/ is in the site's navigation."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from tests.helpers import DOCS, REPO

pytestmark = pytest.mark.timeout(180)


def _nav_pages(entries) -> set[str]:
    pages = set()
    for entry in entries:
        for value in (entry.values() if isinstance(entry, dict) else [entry]):
            pages |= _nav_pages(value) if isinstance(value, list) else {value}
    return pages


def test_the_site_builds_strictly(tmp_path):
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                           cwd=REPO, capture_output=True, text=True, timeout=150,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-4000:]
    assert "WARNING" not in built.stderr, built.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "users" / "exit-codes" / "index.html").is_file()


def test_every_page_is_in_the_navigation():
    config = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=yaml.SafeLoader)
    assert config["theme"]["name"] == "material" and config["validation"]["anchors"] == "warn"
    nav = _nav_pages(config["nav"])
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert len(pages) > 30
    assert pages == nav, pages ^ nav
