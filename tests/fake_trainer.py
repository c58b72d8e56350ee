"""A stand-in for a PerforatedAI DDP script, without torch, whose behaviour the tests choose.

It follows the real protocol: `--perforate_model_parallel` writes SAVE/array_dims.csv and exits 0;
each generation rank 0 writes switch_N.pt (N = 2 * generation) and every rank exits 0; in the last
generation rank 0 writes SAVE/.training_complete instead. Options add faults.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
parser.add_argument("--save", default="PAI", help="save folder the script writes (its own option, like real scripts)")
parser.add_argument("--generations", type=int, default=3, help="generation that writes the completion marker")
parser.add_argument("--train-seconds", type=float, default=0.0)
parser.add_argument("--fail-rank", type=int, default=None)
parser.add_argument("--fail-code", type=int, default=3)
parser.add_argument("--fail-generation", type=int, default=1)
parser.add_argument("--fail-init", type=int, default=None, help="init run exits with this code")
parser.add_argument("--no-progress", action="store_true", help="exit 0 without writing anything")
parser.add_argument("--rewrite-switch", action="store_true", help="rewrite the same switch_2.pt every generation")
parser.add_argument("--ignore-sigterm", action="store_true")
parser.add_argument("--hang", action="store_true", help="run until signalled")
parser.add_argument("--linger-after-marker", action="store_true", help="keep running after writing the marker")
parser.add_argument("--spawn-grandchild", action="store_true", help="start a sleeper in its own session")
parser.add_argument("--ready-dir", default=None, help="touch READY_DIR/<gen>-<rank>.<pid> once running")
parser.add_argument("--signal-log", default=None, help="append 'rank signame' here for each signal received")
args = parser.parse_args()

rank = int(os.environ.get("RANK", "0"))
generation = int(os.environ.get("PAI_LAUNCH_GENERATION", "0") or 0)


def log_signal(signum, frame):
    if args.signal_log:
        with open(args.signal_log, "a") as handle:
            handle.write(f"{rank} {signal.Signals(signum).name}\n")
    if signum == signal.SIGTERM and args.ignore_sigterm:
        return
    if signum in (signal.SIGUSR1, signal.SIGUSR2):
        return
    sys.exit(128 + signum)


for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(signum, log_signal)

if args.perforate_model_parallel:
    if args.fail_init is not None:
        print("init run failing on purpose", file=sys.stderr)
        sys.exit(args.fail_init)
    os.makedirs(args.save, exist_ok=True)
    with open(os.path.join(args.save, "array_dims.csv"), "w") as handle:
        handle.write(".fc1,1,32\n")
    print("init done")
    sys.exit(0)

if args.spawn_grandchild:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
if args.ready_dir:
    open(os.path.join(args.ready_dir, f"{generation}-{rank}.{os.getpid()}"), "w").close()
print(f"rank {rank} generation {generation} load={args.pai_load_folder}", flush=True)

deadline = time.monotonic() + args.train_seconds
while args.hang or time.monotonic() < deadline:
    time.sleep(0.05)

if args.fail_rank == rank and args.fail_generation == generation:
    print(f"rank {rank} failing on purpose with {args.fail_code}", file=sys.stderr, flush=True)
    sys.exit(args.fail_code)
if args.no_progress:
    sys.exit(0)
if rank == 0:
    if generation >= args.generations:
        with open(os.path.join(args.save, ".training_complete"), "w") as handle:
            handle.write("complete")
        while args.linger_after_marker:
            time.sleep(0.05)
    else:
        number = 2 if args.rewrite_switch else 2 * generation
        with open(os.path.join(args.save, f"switch_{number}.pt"), "wb") as handle:
            handle.write(os.urandom(64))
sys.exit(0)
