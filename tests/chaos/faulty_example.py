"""The real PerforatedAI example (examples/train_pai_ddp.py) with one fault injected, for the chaos scenarios.

The example itself is run unchanged (runpy), with the same arguments. The fault is chosen by
environment variables and fires at one of the example's progress lines (`PAI_EXAMPLE {"event": ...}`
on stdout: process_start, first_step, epoch, restructure_exit, complete_exit):

    CHAOS_FAULT        crash | hang | tear | ignore_sigterm     (unset: no fault)
    CHAOS_RANK         the rank that misbehaves (default 1; the init run is rank 0)
    CHAOS_GENERATIONS  PAI_LAUNCH_GENERATION values where it does, comma-separated, or "all" (every
                       generation, not the init run, which is generation 0) (default all)
    CHAOS_AT           the progress event at which it fires (default epoch)
    CHAOS_EPOCH        with CHAOS_AT=epoch: only at this epoch (default: the first epoch line)
    CHAOS_CODE         crash: the exit code (default 7)

crash: print one fixed line to stderr and _exit(CHAOS_CODE) (the same line every time, so two crashes
    are "identical" for pai-launch's early-failure rule).
hang: stop making progress for good (sleep forever; signals keep their default action).
tear: cut the newest SAVE/switch_N.pt to half its size (what a kill in mid-write leaves), then carry on.
ignore_sigterm: SIGTERM is ignored from the start (CHAOS_AT is not used).
"""

import json
import os
import runpy
import signal
import sys
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "train_pai_ddp.py"

fault = os.environ.get("CHAOS_FAULT", "")
rank = int(os.environ.get("RANK") or 0)
generation = int(os.environ.get("PAI_LAUNCH_GENERATION") or 0)
wanted = os.environ.get("CHAOS_GENERATIONS", "all")
in_generation = generation >= 1 if wanted == "all" else str(generation) in wanted.split(",")
armed = bool(fault) and in_generation and rank == int(os.environ.get("CHAOS_RANK", "1"))
at = os.environ.get("CHAOS_AT", "epoch")
at_epoch = os.environ.get("CHAOS_EPOCH")
code = int(os.environ.get("CHAOS_CODE", "7"))


def save_folder() -> str:
    argv = sys.argv[1:]
    for index, arg in enumerate(argv):
        if arg == "--pai-save-name" and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--pai-save-name="):
            return arg.split("=", 1)[1]
    return "PAI"


def fire(event: dict) -> None:
    global armed
    armed = False
    where = f"rank {rank} generation {generation} at {event.get('event')}"
    if fault == "crash":
        sys.__stderr__.write(f"chaos: rank {rank} crashing with exit code {code} at {at}\n")
        sys.__stderr__.flush()
        os._exit(code)
    if fault == "hang":
        sys.__stderr__.write(f"chaos: {where}: hanging\n")
        sys.__stderr__.flush()
        while True:
            time.sleep(1)
    if fault == "tear":
        folder = save_folder()
        names = [n for n in os.listdir(folder) if n.startswith("switch_") and n.endswith(".pt")]
        newest = max(names, key=lambda n: int(n[len("switch_"):-len(".pt")]))
        path = os.path.join(folder, newest)
        os.truncate(path, os.path.getsize(path) // 2)
        sys.__stderr__.write(f"chaos: {where}: tore {path}\n")
        sys.__stderr__.flush()


class Tripwire:
    """Stands in for stdout: passes every write on and fires the fault at the chosen progress line."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if armed and "PAI_EXAMPLE " in text:
            try:
                event = json.loads(text.split("PAI_EXAMPLE ", 1)[1])
            except ValueError:
                event = {}
            matches = event.get("event") == at and (at != "epoch" or at_epoch is None or str(event.get("epoch"))
                                                    == at_epoch)
            if matches and fault == "tear":
                written = self._stream.write(text)
                self._stream.flush()
                fire(event)
                return written
            if matches:
                self._stream.write(text)
                self._stream.flush()
                fire(event)
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


if armed and fault == "ignore_sigterm":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    armed = False
if armed:
    sys.stdout = Tripwire(sys.stdout)
sys.argv = [str(EXAMPLE), *sys.argv[1:]]
runpy.run_path(str(EXAMPLE), run_name="__main__")
