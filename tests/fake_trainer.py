"""A stand-in for a PerforatedAI DDP script, without torch, whose behaviour the tests choose.

It follows the real protocol: `--perforate_model_parallel` writes SAVE/array_dims.csv and exits 0;
each generation rank 0 writes switch_N.pt (N = 2 * generation) and every rank exits 0; in the last
generation rank 0 writes SAVE/.training_complete instead. Options add faults.

Options that report back to a test (all optional): --record DIR (one JSON file per process: argv,
PAI_LAUNCH_*/RANK/WORLD_SIZE, pid, cwd, whether stdin is /dev/null), --ready-dir DIR (a file per running
process, holding its --spawn-grandchild sleeper's pid), --signal-log FILE (one 'rank SIGNAME' line per signal).
With --record and --torn-switch-generation, the torn bytes are also copied to RECORD/torn-switch_N.pt.

Switch files are whole safetensors files; a worker given --pai_load_folder reads the newest one and
fails like the real library (exit 1, "SafetensorError") when it is torn, and (exit 1, "RuntimeError") when its
metadata says "unloadable" (a whole file the model cannot load).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
parser.add_argument("--save", default="PAI", help="save folder the script writes (its own option, like real scripts)")
parser.add_argument("--generations", type=int, default=3, help="generation that writes the completion marker")
parser.add_argument("--train-seconds", type=float, default=0.0)
parser.add_argument("--fail-rank", type=int, default=None)
parser.add_argument("--fail-code", type=int, default=3)
parser.add_argument("--fail-generation", default="1",
                    help="generation(s) in which the --fail-rank fails: N or a comma-separated list N,M")
parser.add_argument("--fail-plan", default="",
                    help="G:R[,G:R...]: rank R fails (as --fail-rank does) in generation G, one rank per generation")
parser.add_argument("--fail-init", type=int, default=None, help="init run exits with this code")
parser.add_argument("--fail-output", default=None, help="a failing rank or init run first writes this file to stderr")
parser.add_argument("--no-progress", action="store_true", help="exit 0 without writing anything")
parser.add_argument("--rewrite-switch", action="store_true", help="rewrite the same switch_2.pt every generation")
parser.add_argument("--ignore-sigterm", action="store_true")
parser.add_argument("--hang", action="store_true", help="run until signalled")
parser.add_argument("--linger-after-marker", action="store_true", help="keep running after writing the marker")
parser.add_argument("--spawn-grandchild", action="store_true", help="start a sleeper in its own session")
parser.add_argument("--ready-dir", default=None, help="touch READY_DIR/<gen>-<rank>.<pid> once running")
parser.add_argument("--signal-log", default=None, help="append 'rank signame' here for each signal received")
parser.add_argument("--stop-log", default=None,
                    help="append 'rank signame' here once a stop signal's --exit-delay is over, as the worker leaves "
                    "(it was given the time it asked for)")
parser.add_argument("--ignore-sigint", action="store_true", help="log SIGINT and keep running")
parser.add_argument("--load-stage", choices=("switch", "latest"), default="switch",
                    help="what --pai_load_folder loads: the newest switch_N.pt, or latest.pt (which must exist)")
parser.add_argument("--torn-latest-generation", type=int, default=None,
                    help="in this generation rank 0 leaves a torn latest.pt behind before it fails or finishes")
parser.add_argument("--exit-delay", type=float, default=0.0,
                    help="take this long to exit after a stop signal (signals meanwhile are logged too)")
parser.add_argument("--exit-delay-rank", type=int, default=None,
                    help="only this rank takes --exit-delay to exit (the others exit at once)")
parser.add_argument("--hang-rank", type=int, default=None,
                    help="only this rank runs until signalled (with --hang-generation: only in that generation)")
parser.add_argument("--hang-generation", type=int, default=None,
                    help="run until signalled in this generation only (with --hang-rank: only that rank)")
parser.add_argument("--hold-until", default=None, help="keep training until this file exists")
parser.add_argument("--hold-generation", type=int, default=None,
                    help="--hold-until holds only this generation (default: every one)")
parser.add_argument("--fail-signal", type=int, default=None,
                    help="the --fail-rank dies by this signal (default action) instead of exiting with --fail-code")
parser.add_argument("--hang-init", action="store_true", help="the init run runs until signalled (after its ready file)")
parser.add_argument("--init-replaces-save", action="store_true",
                    help="the init run moves its save folder to SAVE.replaced and writes a new one (a folder swapped "
                    "under us)")
parser.add_argument("--init-clears-save", action="store_true",
                    help="the init run removes its save folder (shutil.rmtree, if there) before it writes it: a fresh "
                    "start")
parser.add_argument("--clear-save-generation", type=int, default=None,
                    help="in this generation rank 0 removes the save folder once running and writes latest.pt into a "
                    "new one")
# Same names as pai-launch options: a test passes them after SCRIPT to prove they reach the script, not pai-launch.
parser.add_argument("--nproc", default=None)
parser.add_argument("--dry-run", action="store_true")
parser.add_argument("--fail-every", action="store_true", help="the --fail-rank fails in every generation")
parser.add_argument("--heartbeat", type=float, default=None,
                    help="rank 0 rewrites SAVE/latest.pt every HEARTBEAT seconds while training (as PerforatedAI does "
                    "per epoch)")
parser.add_argument("--torn-switch-generation", type=int, default=None,
                    help="in this generation rank 0 leaves a torn switch file (as a kill mid-write would) and exits 0")
parser.add_argument("--fail-after-switch", action="store_true",
                    help="the --fail-rank (not 0) fails only once rank 0 wrote this generation's switch file (or the "
                    "marker)")
parser.add_argument("--default-sigusr1", action="store_true",
                    help="leave SIGUSR1 at its default action (the process dies of it), like a script without a "
                    "handler")
parser.add_argument("--crash-on-stop", action="store_true",
                    help="the --fail-rank, once a stop signal comes, prints a traceback and exits with --fail-code "
                         "(a rank whose own teardown crashes), instead of 128+N")
parser.add_argument("--say", default=None, help="each training process prints 'SAY rank R generation G' once running")
parser.add_argument("--flood-mb", type=float, default=0.0,
                    help="each training process writes this many MB of numbered lines to stdout as fast as it can, "
                         "then 'rank R flood done' as its last line")
parser.add_argument("--garbage-switch", action="store_true",
                    help="rank 0 writes every switch file as plain text, not a checkpoint (a script that can never "
                    "save)")
parser.add_argument("--unloadable-switch", action="store_true",
                    help="rank 0 writes every switch file whole but marked unloadable: every rank resuming from it "
                    "fails")
parser.add_argument("--times", default=None,
                    help="append 'start|fail GENERATION RANK TIME' lines here (time.time()) at start and before "
                    "failing")
parser.add_argument("--record", default=None,
                    help="write RECORD/<gen>-<rank>-<pid>.json with argv, environment and stdin on start")
args = parser.parse_args()
fail_generations = {int(item) for item in str(args.fail_generation).split(",") if item.strip()}
fail_plan = {int(g): int(r) for g, r in (item.split(":") for item in args.fail_plan.split(",") if item.strip())}


def safetensors_bytes(payload: bytes) -> bytes:
    """A whole safetensors file holding one uint8 tensor, written by hand (the format PerforatedAI uses).

    The same as tests.helpers.safetensors_bytes: this script runs on its own in worker processes (also through
    runpy from tests/chaos/, where tests/ is not on sys.path), so it keeps its own copy rather than import one."""
    header = json.dumps({"w": {"dtype": "U8", "shape": [len(payload)], "data_offsets": [0, len(payload)]}}).encode()
    return len(header).to_bytes(8, "little") + header + payload


def load_newest_switch(folder: str) -> None:
    """Fail like the real library does on a torn checkpoint: every rank dies in its load."""
    names = [n for n in os.listdir(folder) if n.startswith("switch_") and n.endswith(".pt")]
    if not names:
        return
    newest = max(names, key=lambda n: int(n[len("switch_"):-len(".pt")]))
    data = open(os.path.join(folder, newest), "rb").read()
    size = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
    try:
        header = json.loads(data[8:8 + size]) if 0 <= size <= len(data) - 8 else None
        end = header["w"]["data_offsets"][1] if header else -1
    except (ValueError, KeyError):
        end = -1
    if end < 0 or 8 + size + end != len(data):
        print(f"SafetensorError: incomplete metadata, file not fully covered: {newest}", file=sys.stderr, flush=True)
        sys.exit(1)
    if (header.get("__metadata__") or {}).get("unloadable"):  # whole, but not what the model can load
        print(f"RuntimeError: Error(s) in loading state_dict: size mismatch ({newest})", file=sys.stderr, flush=True)
        sys.exit(1)

rank = int(os.environ.get("RANK", "0"))
generation = int(os.environ.get("PAI_LAUNCH_GENERATION", "0") or 0)


def stamp(what: str) -> None:
    if args.times:
        with open(args.times, "a") as handle:
            handle.write(f"{what} {generation} {rank} {time.time():.6f}\n")


stamp("start")


def log_signal(signum, frame):
    if args.signal_log:
        with open(args.signal_log, "a") as handle:
            handle.write(f"{rank} {signal.Signals(signum).name}\n")
    if signum == signal.SIGTERM and args.ignore_sigterm:
        return
    if signum == signal.SIGINT and args.ignore_sigint:
        return
    if signum in (signal.SIGUSR1, signal.SIGUSR2):
        return
    delay = args.exit_delay if args.exit_delay_rank in (None, rank) else 0.0
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline:
        time.sleep(0.02)
    if args.stop_log:
        with open(args.stop_log, "a") as handle:
            handle.write(f"{rank} {signal.Signals(signum).name}\n")
    if args.crash_on_stop and args.fail_rank == rank:
        print("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
              "RuntimeError: teardown failed while stopping", file=sys.stderr, flush=True)
        os._exit(args.fail_code)
    sys.exit(128 + signum)


for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
    if not (signum == signal.SIGUSR1 and args.default_sigusr1):
        signal.signal(signum, log_signal)


def _write_atomically(path, text):
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)


def _stdin_is_devnull():
    try:
        here, null = os.fstat(0), os.stat(os.devnull)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (null.st_dev, null.st_ino) or here.st_rdev == null.st_rdev


if args.record:
    keys = ("PAI_LAUNCH_RUN_ID", "PAI_LAUNCH_GENERATION", "RANK", "LOCAL_RANK", "WORLD_SIZE", "OMP_NUM_THREADS",
            "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
    record = {
        "argv": sys.argv[1:],
        "env": {key: os.environ.get(key) for key in keys},
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "cwd": os.getcwd(),
        "stdin_devnull": _stdin_is_devnull(),
        "init": args.perforate_model_parallel,
        "load_folder": args.pai_load_folder,
    }
    _write_atomically(os.path.join(args.record, f"{generation}-{rank}-{os.getpid()}.json"), json.dumps(record))

if args.perforate_model_parallel:
    if args.fail_init is not None:
        print("init run failing on purpose", file=sys.stderr)
        if args.fail_output:
            sys.stderr.write(open(args.fail_output).read())
        sys.exit(args.fail_init)
    if args.ready_dir:
        _write_atomically(os.path.join(args.ready_dir, f"{generation}-{rank}.{os.getpid()}"), "")
    while args.hang_init:
        time.sleep(0.05)
    if args.init_clears_save:
        shutil.rmtree(args.save, ignore_errors=True)
    os.makedirs(args.save, exist_ok=True)
    with open(os.path.join(args.save, "array_dims.csv"), "w") as handle:
        handle.write(".fc1,1,32\n")
    if args.init_replaces_save:
        os.rename(args.save, args.save + ".replaced")
        os.makedirs(args.save)
        with open(os.path.join(args.save, "array_dims.csv"), "w") as handle:
            handle.write(".fc1,1,32\n")
    print("init done")
    sys.exit(0)

if args.pai_load_folder and args.load_stage == "latest":
    if not os.path.exists(os.path.join(args.pai_load_folder, "latest.pt")):
        print(f"FileNotFoundError: {args.pai_load_folder}/latest.pt", file=sys.stderr, flush=True)
        sys.exit(1)
elif args.pai_load_folder:
    load_newest_switch(args.pai_load_folder)

# Every rank loads before rank 0 may save (the real script's barriers see to that): otherwise a slow rank could load
# a switch file rank 0 wrote in this very generation. A file barrier in TMPDIR, one folder per torch rendezvous.
barrier = None
world_size = int(os.environ.get("WORLD_SIZE", "1") or 1)
if os.environ.get("TORCHELASTIC_RUN_ID") and world_size > 1:
    barrier = os.path.join(tempfile.gettempdir(), f"fake-trainer-barrier-{os.environ['TORCHELASTIC_RUN_ID']}")
    os.makedirs(barrier, exist_ok=True)
    open(os.path.join(barrier, str(rank)), "w").close()
    if rank == 0:  # before the ready file: once every rank is ready, the barrier folder is gone
        while len(os.listdir(barrier)) < world_size:
            time.sleep(0.01)
        shutil.rmtree(barrier, ignore_errors=True)

grandchild = None
if args.spawn_grandchild:
    # The working directory rides along in argv so a test can find the sleeper by its command line.
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", os.getcwd()],
                                  start_new_session=True)
if args.ready_dir:
    # The file's content is the grandchild's pid (empty without one).
    _write_atomically(os.path.join(args.ready_dir, f"{generation}-{rank}.{os.getpid()}"),
                      "" if grandchild is None else str(grandchild.pid))
print(f"rank {rank} generation {generation} load={args.pai_load_folder}", flush=True)
if args.say:
    print(f"{args.say} rank {rank} generation {generation}", flush=True)
if args.flood_mb:
    line = f"rank {rank} flooding {'x' * 80}\n".encode()
    block = line * (65536 // len(line))
    for _ in range(max(1, int(args.flood_mb * 1e6) // len(block))):
        sys.stdout.buffer.write(block)
    sys.stdout.buffer.flush()
    print(f"rank {rank} flood done", flush=True)

if args.clear_save_generation == generation and rank == 0:
    os.rename(args.save, args.save + ".removing")  # the new folder is made while the old one still holds its inode
    os.makedirs(args.save)
    shutil.rmtree(args.save + ".removing")
    with open(os.path.join(args.save, "latest.pt"), "wb") as handle:
        handle.write(safetensors_bytes(os.urandom(16)))

deadline = time.monotonic() + args.train_seconds
if args.hang_rank is not None and args.hang_generation is not None:
    hang = args.hang or (args.hang_rank == rank and args.hang_generation == generation)
else:
    hang = args.hang or args.hang_rank == rank or args.hang_generation == generation
last_beat = 0.0
held = args.hold_until and args.hold_generation in (None, generation)
while hang or time.monotonic() < deadline or (held and not os.path.exists(args.hold_until)):
    if args.heartbeat is not None and rank == 0 and time.monotonic() - last_beat >= args.heartbeat:
        last_beat = time.monotonic()
        with open(os.path.join(args.save, "latest.pt"), "wb") as handle:
            handle.write(safetensors_bytes(os.urandom(16)))
    time.sleep(0.05)

if args.torn_latest_generation == generation and rank == 0:
    with open(os.path.join(args.save, "latest.pt"), "wb") as handle:
        handle.write(safetensors_bytes(os.urandom(64))[:40])
if args.fail_rank == rank and (args.fail_every or generation in fail_generations) or fail_plan.get(generation) == rank:
    if args.fail_after_switch:  # a rank other than 0: it fails once rank 0 has saved this generation's progress
        own_switch = os.path.join(args.save, f"switch_{2 * generation}.pt")
        marker = os.path.join(args.save, ".training_complete")
        while not os.path.exists(own_switch) and not os.path.exists(marker):
            time.sleep(0.02)
    if args.fail_output:
        sys.stderr.write(open(args.fail_output).read())
        sys.stderr.flush()
    if args.fail_signal is not None:
        print(f"rank {rank} killing itself with signal {args.fail_signal}", file=sys.stderr, flush=True)
        if args.fail_signal not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(args.fail_signal, signal.SIG_DFL)
        os.kill(os.getpid(), args.fail_signal)
        time.sleep(10)
    print(f"rank {rank} failing on purpose with {args.fail_code}", file=sys.stderr, flush=True)
    stamp("fail")
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
        content = safetensors_bytes(os.urandom(64))
        if args.unloadable_switch:
            payload = os.urandom(64)
            header = json.dumps({"w": {"dtype": "U8", "shape": [64], "data_offsets": [0, 64]},
                                 "__metadata__": {"unloadable": "yes"}}).encode()
            content = len(header).to_bytes(8, "little") + header + payload
        if args.garbage_switch:
            content = b"not a checkpoint: " + b"text " * 20 + b"\n"
        if args.torn_switch_generation == generation:
            content = content[: len(content) // 2]
            if args.record:  # what was torn, for a test to compare with what pai-launch quarantined
                with open(os.path.join(args.record, f"torn-switch_{number}.pt"), "wb") as handle:
                    handle.write(content)
        with open(os.path.join(args.save, f"switch_{number}.pt"), "wb") as handle:
            handle.write(content)
sys.exit(0)
