"""The fault table of the manual's Faults tested page is what `python -m scripts.chaos --markdown` prints, and every
test it names exists."""

from __future__ import annotations

import ast
import re

import pytest

from scripts.chaos import markdown_table
from tests.chaos.chaos_scenarios import SCENARIOS
from tests.chaos.elsewhere import ELSEWHERE
from tests.helpers import REPO, docs_page

pytestmark = pytest.mark.timeout(30)

BLOCK = re.compile(r"<!-- python -m scripts\.chaos --markdown -->\n(.*?)<!-- end -->", re.S)


def test_the_faults_tested_page_holds_the_fault_table_as_printed():
    found = BLOCK.search(docs_page("users/faults-tested.md"))
    assert found, "docs/users/faults-tested.md has no fault table block"
    assert found.group(1).strip() == markdown_table(), "regenerate it: python -m scripts.chaos --markdown"


def test_the_table_has_a_row_per_scenario_and_per_test_elsewhere():
    rows = markdown_table().splitlines()[2:]
    assert len(rows) == len(SCENARIOS) + len(ELSEWHERE)
    assert len({t.fault for t in ELSEWHERE} | {s.name for s in SCENARIOS}) == len(rows), "two rows name one fault"


@pytest.mark.parametrize("tested", ELSEWHERE, ids=lambda t: t.test)
def test_every_test_named_elsewhere_exists(tested):
    path, _, name = tested.test.partition("::")
    source = REPO / path
    assert source.is_file(), f"{path} does not exist"
    functions = {node.name for node in ast.walk(ast.parse(source.read_text()))
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assert name in functions, f"{path} has no test {name}"
