"""The probe (envreport/probe.py) run in the interpreter a run would use, under a time limit.

Importing torch in pai-launch's own process would load CUDA's libraries into the supervisor and tell nothing of
another interpreter; so the probe runs as a child, and what it cannot say (it failed, timed out, printed no JSON) is
reported as its status, never raised.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

PROBE = Path(__file__).with_name("probe.py")
#: How much of a failed probe's stderr the report keeps: its last lines, where the error is.
STDERR_LINES = 3


class NoInterpreter(ValueError):
    """--python names no interpreter that can be run; the message is one line naming it and the fix."""


def resolve(python: str) -> str:
    """The interpreter's path: a path as given, a bare name looked up on PATH, as a shell would."""
    found = python if os.sep in python else shutil.which(python)
    if found is None or not Path(found).exists():
        raise NoInterpreter(f"--python {python}: no such file: give the Python interpreter the run would use, "
                            "e.g. --python .venv/bin/python")
    if Path(found).is_dir() or not os.access(found, os.X_OK):
        raise NoInterpreter(f"--python {python} is not an executable file: give the Python interpreter the run would "
                            "use, e.g. --python .venv/bin/python")
    return found


def probe(python: str, timeout: float, *, run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
          clock: Callable[[], float] = time.monotonic) -> dict:
    """{"python", "status": ok|failed|timed out, "detail", "seconds", "facts"}; `facts` is the probe's JSON (None
    unless ok)."""
    started = clock()
    result = {"python": python, "status": "ok", "detail": None, "seconds": 0.0, "facts": None}
    try:
        done = run([python, "-c", PROBE.read_text()], capture_output=True, text=True, timeout=timeout,
                   stdin=subprocess.DEVNULL, errors="replace")
    except subprocess.TimeoutExpired:
        result.update(status="timed out", detail=f"no answer within {timeout:g} s (raise it with --timeout)")
    except OSError as exc:
        result.update(status="failed", detail=f"cannot run it: {exc.strerror or exc}")
    else:
        result.update(parse(done.returncode, done.stdout, done.stderr))
    result["seconds"] = round(clock() - started, 3)
    return result


def parse(returncode: int, stdout: str, stderr: str) -> dict:
    """The status, detail and facts that a finished probe's exit code and output say."""
    lines = stdout.strip().splitlines()
    facts = None
    if lines:
        try:
            facts = json.loads(lines[-1])
        except ValueError:
            facts = None
    if returncode == 0 and isinstance(facts, dict):
        return {"status": "ok", "detail": None, "facts": facts}
    said = " | ".join(line.strip() for line in stderr.strip().splitlines()[-STDERR_LINES:] if line.strip())
    why = f"exit code {returncode}" if returncode >= 0 else f"killed by signal {-returncode}"
    if returncode == 0:
        why = "exit code 0 but no JSON on stdout"
    return {"status": "failed", "detail": f"{why}: {said}" if said else why, "facts": None}
