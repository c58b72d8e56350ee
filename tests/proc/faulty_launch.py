"""pai-launch with a bug injected, to show its exit-code boundary: `python faulty_launch.py PAI_LAUNCH_ARGS...`.

PAI_TEST_FAULT chooses where the bug is (this process only; the agent and workers are untouched):
- record-while-training: recording the run's state raises once generation 2's workers are training;
- agent-result: the thread that reads an agent's result raises;
- watcher: the save-folder watcher's handler raises on the first write it sees;
- session-open: opening the save folder raises, before anything is started (the command line's boundary).
"""

import os

from pai_launch import entry
from pai_launch.savefmt import savedir
from pai_launch.supervise.folder import session
from pai_launch.wire.protocol import REPORTS, GenerationResult

FAULT = os.environ["PAI_TEST_FAULT"]


def injected(where: str):
    raise RuntimeError(f"injected fault in {where}")


if FAULT == "record-while-training":
    real_record = session.SaveSession.record

    def record(self, state):
        if state.generation >= 2 and state.current.reached_training:
            injected("record")
        return real_record(self, state)

    session.SaveSession.record = record
elif FAULT == "agent-result":
    real_decode = REPORTS.decode

    def decode(line, expect=None):
        message = real_decode(line, expect)
        return injected("the agent's result") if isinstance(message, GenerationResult) else message

    REPORTS.decode = decode
elif FAULT == "watcher":
    savedir.is_marker = lambda name: injected("the watcher")
elif FAULT == "session-open":
    session.SaveSession.__init__ = lambda self, spec, env: injected("opening the save folder")
else:
    raise SystemExit(f"unknown PAI_TEST_FAULT {FAULT!r}")

entry.main()
