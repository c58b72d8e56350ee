#!/usr/bin/env python3
"""Run test files again and again beside CPU hogs: the multi-node and Slurm tests must pass on a loaded machine, not
only on a quiet one (a test that depends on the machine being fast fails here first).

    python scripts/soak.py                       10 runs of the multi-node and Slurm files beside 2 hogs
    python scripts/soak.py --runs 3 --hogs 4 tests/proc/test_multinode.py

Each run is one pytest process on the files (in the project's .venv) in which a skipped test fails
(PAI_LAUNCH_ALL_TIERS=1: a run without its Slurm cluster is no pass); the system tools the files need are installed
first, as ./scripts/test.sh does. The hogs are busy loops, one per core taken, started before the first run and
killed after the last. It prints one line per run and a closing count; each run's whole pytest output is kept in a
folder (--logs, a new temporary one by default) to read why a run failed, and a failed run's test folders (its nodes'
logs and save folders) beside it as run-N/, which pytest would otherwise drop after three later sessions.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILES = ("tests/proc/test_multinode.py", "tests/proc/test_multinode_faults.py",
                 "tests/proc/test_multinode_waits.py", "tests/proc/test_multinode_store.py", "tests/slurm")
HOG = "while True: pass"


def summary(results: list[tuple[int, float, str]]) -> str:
    """The closing line: passes out of runs, and each failing run's number with pytest's last line."""
    passed = sum(code == 0 for code, _, _ in results)
    line = f"{passed} of {len(results)} runs passed"
    failed = [f"run {n}: {last}" for n, (code, _, last) in enumerate(results, 1) if code != 0]
    return line + (f" ({'; '.join(failed)})" if failed else "")


def run_environment(base: dict[str, str]) -> dict[str, str]:
    """The environment of each run: the caller's, with every skip turned into a failure."""
    return {**base, "PAI_LAUNCH_ALL_TIERS": "1"}


def pytest_command(python: str, files: list[str], basetemp: Path) -> list[str]:
    """One run's pytest: quiet, failures and errors summed up, its test folders under `basetemp`."""
    return [python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE", f"--basetemp={basetemp}", *files]


def run_once(files: list[str], python: str, log: Path) -> tuple[int, float, str]:
    started = time.monotonic()
    folders = log.with_suffix("")
    done = subprocess.run(pytest_command(python, files, folders), cwd=ROOT, check=False, capture_output=True,
                          text=True, env=run_environment(dict(os.environ)))
    log.write_text(done.stdout + done.stderr)
    if done.returncode == 0:
        shutil.rmtree(folders, ignore_errors=True)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, time.monotonic() - started, lines[-1] if lines else ""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--logs", type=Path, default=None, help="folder for each run's pytest output")
    args = parser.parse_args(argv)
    logs = args.logs or Path(tempfile.mkdtemp(prefix="pai-soak-"))
    logs.mkdir(parents=True, exist_ok=True)
    print(f"each run's output goes to {logs}/run-N.log", flush=True)
    python = str(ROOT / ".venv" / "bin" / "python")
    subprocess.run(["bash", "-c", "source scripts/system_tools.sh && pai_system_tools"], cwd=ROOT, check=True)
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    results = []
    try:
        for n in range(1, args.runs + 1):
            results.append(run_once(args.files, python, logs / f"run-{n}.log"))
            code, took, last = results[-1]
            print(f"run {n}: exit {code} in {took:.0f} s: {last}", flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print(summary(results))
    return 0 if all(code == 0 for code, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
