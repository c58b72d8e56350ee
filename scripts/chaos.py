"""Run every chaos scenario (tests/chaos/chaos_scenarios.py) against real processes and print a table.

Run it as a module from the repository root (it imports the scenarios as the package `tests.chaos`):

    .venv/bin/python -m scripts.chaos                 # the real PerforatedAI example wherever a scenario can use it
    .venv/bin/python -m scripts.chaos --fake          # the fake trainer wherever a scenario can use it (fast)
    .venv/bin/python -m scripts.chaos --only hung     # scenarios whose name contains "hung"
    .venv/bin/python -m scripts.chaos --list
    .venv/bin/python -m scripts.chaos --markdown      # the fault table of docs/users/faults-tested.md: every scenario
                                                      and test, no run

Columns: scenario (trainer), expected outcome, outcome, processes left afterwards (alive 2 s after the
end), files lost (files seen in the working directory that disappeared, except those removed by the
scenario itself or moved to SAVE/.pai-launch/quarantine/), seconds. The last line is PASS or FAIL; the
exit status is 1 when any scenario failed. Each scenario's folders (pai-launch's stdout/stderr in io/)
are kept under --keep DIR, or removed when everything passed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

if not __package__:  # `python scripts/chaos.py`: the package `tests` is not importable from there
    sys.exit("run it from the repository root as a module: python -m scripts.chaos [OPTIONS]")

from tests.chaos import chaos_scenarios as chaos  # noqa: E402
from tests.chaos.elsewhere import ELSEWHERE  # noqa: E402
from tests.helpers import become_subreaper  # noqa: E402

COLUMNS = (("scenario", 26), ("expected", 34), ("outcome", 58), ("left", 5), ("lost", 5), ("s", 6), ("", 4))


def row(cells: list[str]) -> list[str]:
    wrapped = [textwrap.wrap(text, width) or [""] for text, (_, width) in zip(cells, COLUMNS)]
    height = max(len(lines) for lines in wrapped)
    return [" | ".join(f"{(lines[i] if i < len(lines) else ''):<{width}}"
                       for lines, (_, width) in zip(wrapped, COLUMNS))
            for i in range(height)]


def markdown_table() -> str:
    """The fault table of docs/users/faults-tested.md: each chaos scenario (run by tests/chaos/test_chaos.py), then each
    fault tested in
    its own tier (tests/chaos/elsewhere.py)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| fault | what pai-launch does | tested by |", "| --- | --- | --- |"]
    for scenario in chaos.SCENARIOS:
        where = {(chaos.FAKE, chaos.REAL): "`tests/chaos` on the fake trainer, `scripts/chaos.py` on the real example",
                 (chaos.REAL,): "`tests/chaos` on the real example"}.get(scenario.trainers, "`tests/chaos`")
        lines.append(f"| {cell(scenario.name)} | {cell(scenario.expected)} | {where} |")
    for tested in ELSEWHERE:
        lines.append(f"| {cell(tested.fault)} | {cell(tested.outcome)} | `{tested.test}` |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fake", action="store_true", help="use the fake trainer wherever a scenario can")
    parser.add_argument("--only", action="append", default=[], help="run scenarios whose name contains this "
                        "(repeatable)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--markdown", action="store_true", help="print the fault table of docs/users/faults-tested.md "
                        "and exit (runs nothing)")
    parser.add_argument("--keep", type=Path, default=None, help="keep every scenario's folder under this directory")
    options = parser.parse_args()

    if options.markdown:
        print(markdown_table())
        return 0
    chosen = [s for s in chaos.SCENARIOS if not options.only or any(o.lower() in s.name.lower() for o in options.only)]
    if options.list:
        for scenario in chosen:
            print(f"{scenario.name}  [{', '.join(scenario.trainers)}]  expected: {scenario.expected}")
        return 0
    if not chosen:
        print(f"no scenario matches {options.only}", file=sys.stderr)
        return 2

    become_subreaper()
    base = options.keep or Path(tempfile.mkdtemp(prefix="pai-chaos-"))
    base.mkdir(parents=True, exist_ok=True)
    results = []
    began = time.monotonic()
    header = row([name for name, _ in COLUMNS])
    print("\n".join(header), flush=True)
    print("-+-".join("-" * width for _, width in COLUMNS), flush=True)
    for index, scenario in enumerate(chosen):
        trainer = scenario.trainer_for(prefer_real=not options.fake)
        result = chaos.execute(scenario, trainer, base / f"{index:02d}-{chaos.slug(scenario.name)}")
        results.append(result)
        cells = [f"{scenario.name} ({trainer})", scenario.expected, result.outcome,
                 str(len(result.left)), str(len(result.lost)), f"{result.seconds:.1f}",
                 "skip" if result.skipped else "ok" if result.ok else "FAIL"]
        print("\n".join(row(cells)), flush=True)
    failed = [r for r in results if not r.ok]
    skipped = [r for r in results if r.skipped]
    print()
    for result in failed:
        print(result.report())
    total = time.monotonic() - began
    print(f"{'FAIL' if failed else 'PASS'}: {len(results) - len(failed) - len(skipped)}/{len(results)} scenarios passed"
          + (f", {len(skipped)} skipped" if skipped else "") + f" in {total:.0f} s"
          + (f"; folders kept in {base}" if failed or options.keep else ""))
    if not failed and options.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
