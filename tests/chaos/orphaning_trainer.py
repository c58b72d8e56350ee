"""tests/fake_trainer.py, but each process first leaves orphans behind that exit: zombies for the reaper.

    orphaning_trainer.py --orphans N --orphan-dir DIR [fake_trainer options...]

Each orphan is a grandchild whose parent (a child of this trainer) exits at once, so the kernel
re-parents it to the nearest subreaper, or to PID 1 of the PID namespace: pai-launch either way.
The orphan waits until it has been re-parented, writes DIR/<its pid> holding
`{"pid": ..., "ppid": <its new parent>, "nspid": [...]}` (pids as seen in its own PID namespace; nspid
is the NSpid line of /proc/self/status, outermost namespace first as far as this /proc shows), and
exits: a zombie until its new parent reaps it. Then the fake trainer runs with the other options.
"""

import json
import os
import runpy
import sys
import time
from pathlib import Path

FAKE_TRAINER = Path(__file__).resolve().parent.parent / "fake_trainer.py"


def own_options(argv: list[str]) -> tuple[int, str | None, list[str]]:
    count, folder, rest = 0, None, []
    items = iter(argv)
    for item in items:
        if item == "--orphans":
            count = int(next(items))
        elif item == "--orphan-dir":
            folder = next(items)
        else:
            rest.append(item)
    return count, folder, rest


def nspid() -> list[int]:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("NSpid:"):
                return [int(part) for part in line.split()[1:]]
    return [os.getpid()]


def leave_orphan(folder: str) -> None:
    middle = os.fork()
    if middle:
        os.waitpid(middle, 0)  # our own child: reaped by us, as a trainer would
        return
    # The middle process: fork the orphan-to-be and leave at once.
    parent = os.getpid()
    if os.fork():
        os._exit(0)
    deadline = time.monotonic() + 10
    while os.getppid() == parent and time.monotonic() < deadline:  # until the middle process is gone
        time.sleep(0.005)
    record = {"pid": os.getpid(), "ppid": os.getppid(), "nspid": nspid()}
    temp = os.path.join(folder, f".{os.getpid()}.tmp")
    with open(temp, "w") as handle:
        json.dump(record, handle)
    os.replace(temp, os.path.join(folder, str(os.getpid())))
    os._exit(0)


count, folder, rest = own_options(sys.argv[1:])
if "--perforate_model_parallel" not in rest and folder:
    os.makedirs(folder, exist_ok=True)
    for _ in range(count):
        leave_orphan(folder)
sys.argv = [str(FAKE_TRAINER), *rest]
runpy.run_path(str(FAKE_TRAINER), run_name="__main__")
