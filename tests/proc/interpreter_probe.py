"""A training script that reports how its interpreter was set up, then ends the way it is told.

The warm-worker tests run it cold (fresh interpreters) and warm (forks of the agent's forkserver) and compare.
It follows the protocol: the init run writes SAVE/array_dims.csv; in each generation rank 0 writes switch_N.pt;
in generation --generations rank 0 writes SAVE/.training_complete instead. Each process writes
OUT/<generation>-<rank>.json before it ends as --end says (in the last generation only):
  return | exit-N | exit-msg | raise | keyboard | os-exit-N | atexit | thread
"""

import sys

#: What the interpreter held before the script imported anything: a warm worker has its forkserver's preload.
PRELOADED = sorted(name for name in ("torch", "perforatedai") if name in sys.modules)

import argparse  # noqa: E402 - after the look at sys.modules above
import atexit  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
parser.add_argument("--out", required=True)
parser.add_argument("--generations", type=int, default=1)
parser.add_argument("--end", default="return")
args = parser.parse_args()

rank = int(os.environ.get("RANK", "0"))
generation = int(os.environ.get("PAI_LAUNCH_GENERATION", "0") or 0)
save = "PAI"


def _signals() -> dict:
    names = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGPIPE", "SIGCHLD", "SIGALRM", "SIGXFSZ")
    found = {name: str(signal.getsignal(getattr(signal, name))) for name in names}
    found["blocked"] = sorted(signal.Signals(number).name for number in signal.pthread_sigmask(signal.SIG_BLOCK, []))
    return found


def report() -> dict:
    import torch

    stdout = sys.stdout
    return {
        "name": __name__, "file": __file__, "argv": sys.argv, "path": sys.path, "cwd": os.getcwd(),
        "env": dict(os.environ), "own_session": os.getsid(0) == os.getpid(), "own_group": os.getpgid(0) == os.getpid(),
        "signals": _signals(), "stdin": os.readlink("/proc/self/fd/0"), "stdin_closed": sys.stdin.closed,
        "stdout": [type(stdout).__name__, stdout.write_through, type(stdout.buffer).__name__, stdout.encoding],
        "stderr": [type(sys.stderr).__name__, sys.stderr.write_through, sys.stderr.errors],
        "main_is_script": getattr(sys.modules["__main__"], "__file__", None) == __file__,
        "threads": threading.active_count(), "torch_threads": torch.get_num_threads(),
        "dont_write_bytecode": sys.dont_write_bytecode, "flags": str(sys.flags),
        "excepthook": sys.excepthook is sys.__excepthook__, "umask": os.umask(os.umask(0)),
        "recursion_limit": sys.getrecursionlimit(), "preloaded": PRELOADED,
    }


def safetensors_bytes(payload: bytes) -> bytes:
    header = json.dumps({"w": {"dtype": "U8", "shape": [len(payload)], "data_offsets": [0, len(payload)]}}).encode()
    return len(header).to_bytes(8, "little") + header + payload


def write(path: str, data: bytes) -> None:
    with open(path + ".tmp", "wb") as handle:
        handle.write(data)
    os.replace(path + ".tmp", path)


os.makedirs(args.out, exist_ok=True)
os.makedirs(save, exist_ok=True)
with open(os.path.join(args.out, f"{generation}-{rank}.json"), "w") as handle:
    json.dump(report(), handle)
print(f"probe rank {rank} generation {generation} reporting", flush=True)

if args.perforate_model_parallel:
    write(os.path.join(save, "array_dims.csv"), b"1,2\n")
    sys.exit(0)
last = generation >= args.generations
succeeds = args.end in ("return", "exit-0", "os-exit-0", "atexit", "thread")
if rank == 0:
    if last and succeeds:
        write(os.path.join(save, ".training_complete"), b"")
    else:
        write(os.path.join(save, f"switch_{2 * generation}.pt"), safetensors_bytes(bytes([generation])))
if not last:
    sys.exit(0)

end = args.end
if end == "return":
    pass
elif end.startswith("exit-") and end[5:].isdigit():
    sys.exit(int(end[5:]))
elif end == "exit-msg":
    sys.exit(f"rank {rank} gives up with a message")
elif end == "raise":
    raise ValueError(f"rank {rank} raised on purpose")
elif end == "keyboard":
    raise KeyboardInterrupt
elif end.startswith("os-exit-"):
    sys.stdout.flush()
    os._exit(int(end[8:]))
elif end == "atexit":
    atexit.register(lambda: write(os.path.join(args.out, f"atexit-{rank}"), b"ran"))
elif end == "thread":
    def late() -> None:
        time.sleep(0.5)
        write(os.path.join(args.out, f"thread-{rank}"), b"ran")

    threading.Thread(target=late, daemon=False).start()
