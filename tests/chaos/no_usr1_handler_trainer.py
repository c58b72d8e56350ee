"""tests/fake_trainer.py without its SIGUSR1 handler, like most real training scripts (the PerforatedAI example
included): SIGUSR1 keeps its default action and kills the process. Same options as the fake trainer."""

import runpy
import signal
import sys
from pathlib import Path

FAKE_TRAINER = Path(__file__).resolve().parent.parent / "fake_trainer.py"
_install = signal.signal


def _all_but_usr1(signum, handler):
    if signum == signal.SIGUSR1:
        return signal.SIG_DFL
    return _install(signum, handler)


signal.signal = _all_but_usr1
sys.argv = [str(FAKE_TRAINER), *sys.argv[1:]]
runpy.run_path(str(FAKE_TRAINER), run_name="__main__")
