"""A trainer whose rank 1 fails while rank 0 lives on and, told to stop, takes its time: the survivor of a failed
generation, for the tests of --grace on torch's own teardown (tests/proc/test_launch_grace.py). No torch.

Rank 0 writes DIR/rank0.pid once its SIGTERM handler is in place and then trains until told to stop; SIGTERM writes
DIR/sigterm and starts its shutdown, which ends --stop-seconds later by its own clock: it writes DIR/stopped and
exits 0. Killed before that, it never writes DIR/stopped. Rank 1 waits for rank0.pid (so the signal finds the
handler) and exits 1. The init run makes the save folder and exits 0.
"""

import argparse
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
parser.add_argument("--save", default="PAI")
parser.add_argument("--dir", required=True, help="where the files the test waits on are written")
parser.add_argument("--stop-seconds", type=float, required=True, help="how long rank 0's shutdown takes")
args = parser.parse_args()


def _write(name: str, text: str) -> None:
    path = os.path.join(args.dir, name)
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)


if args.perforate_model_parallel:
    os.makedirs(args.save, exist_ok=True)
    with open(os.path.join(args.save, "array_dims.csv"), "w") as handle:
        handle.write(".fc1,1,32\n")
    sys.exit(0)

rank = int(os.environ["RANK"])
if rank == 1:
    while not os.path.exists(os.path.join(args.dir, "rank0.pid")):
        time.sleep(0.02)
    print("rank 1 failing on purpose", file=sys.stderr, flush=True)
    sys.exit(1)

stop_at = []


def on_sigterm(signum, frame):
    if not stop_at:
        stop_at.append(time.monotonic() + args.stop_seconds)
        _write("sigterm", str(os.getpid()))


signal.signal(signal.SIGTERM, on_sigterm)
_write("rank0.pid", str(os.getpid()))
while not stop_at or time.monotonic() < stop_at[0]:
    time.sleep(0.05)
_write("stopped", str(os.getpid()))
sys.exit(0)
