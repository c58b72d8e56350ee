"""Warm workers (forks of the agent's preloaded forkserver) start and end the script exactly as cold ones do.

Each test runs tests/proc/interpreter_probe.py under the real pai-launch, warm (the default) and with --cold, and
compares what the script saw (argv, sys.path, cwd, environment, stdin, stdio buffering, signal handlers, its own
session) and how it ended (exit codes, messages, tracebacks, atexit handlers, non-daemon threads, os._exit).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.timeout(120)

PROBE = Path(__file__).with_name("interpreter_probe.py")
MODES = {"warm": (), "cold": ("--cold",)}
#: What differs between any two runs, warm or cold: ids, ports and the run's own temporary paths.
PER_RUN = {"PAI_LAUNCH_RUN_ID", "TORCHELASTIC_RUN_ID", "MASTER_PORT", "TORCHELASTIC_ERROR_FILE"}


def _run(scene, mode: str, *script_args: str, out: str, nproc: int = 2, extra: tuple[str, ...] = ()):
    return scene.run("--nproc", str(nproc), "--max-failures", "1", *MODES[mode], *extra, script=PROBE, instrument=False,
                     script_args=["--out", str(scene.io / out), *script_args], timeout=90)


def _reports(folder: Path) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*-*.json"))}


def _comparable(report: dict) -> dict:
    report = dict(report)
    report.pop("preloaded")  # the point of warm workers: torch is already imported
    report["env"] = {key: value for key, value in report["env"].items() if key not in PER_RUN}
    return report


def alike_reports(cold_folder: Path, warm_folder: Path) -> tuple[dict[str, dict], dict[str, dict]]:
    """Both runs' reports (two generations of two ranks), each worker's warm one equal to its cold one."""
    cold, warm = _reports(cold_folder), _reports(warm_folder)
    assert sorted(cold) == sorted(warm) == ["0-0", "1-0", "1-1", "2-0", "2-1"]
    for key in ("1-0", "1-1", "2-0", "2-1"):
        c, w = _comparable(cold[key]), _comparable(warm[key])
        for field in c:
            assert w[field] == c[field], (key, field, c[field], w[field])
    return cold, warm


def test_warm_workers_see_the_same_interpreter_as_cold_ones(scene):
    launches = {}
    for mode in ("cold", "warm"):  # the same command line both times: the reports go to out/, then are moved
        launch, rc = _run(scene, mode, "--generations", "2", out="out", extra=("--fresh",))
        assert rc == 0, launch.log_summary()
        launches[mode] = launch
        (scene.io / "out").rename(scene.io / mode)
    ready = {mode: launch.event("agent_ready") for mode, launch in launches.items()}
    assert ready["cold"]["workers"] == "cold" and ready["warm"]["workers"] == "warm", ready
    assert "torch" in ready["warm"]["preloaded"].split(",")
    cold, warm = alike_reports(scene.io / "cold", scene.io / "warm")
    # The things that make this comparison worth having: per-generation values did change between generations.
    assert warm["2-0"]["env"]["PAI_LAUNCH_GENERATION"] == "2" and warm["2-0"]["argv"][-2:] == ["--pai_load_folder",
                                                                                               "PAI"]
    assert warm["1-1"]["env"]["RANK"] == "1" and warm["1-0"]["own_session"] and warm["1-0"]["name"] == "__main__"
    assert warm["1-0"]["path"][0] == str(PROBE.parent)
    assert warm["1-0"]["preloaded"] == ["perforatedai", "torch"] and cold["1-0"]["preloaded"] == []
    # Both per generation and per rank: the workers' output reaches the supervisor's stdout with its rank label.
    assert "[rank1]: probe rank 1 generation 2 reporting" in launches["warm"].stdout


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(("end", "exit_", "tail"), [
    ("exit-5", "exit code 5", None),
    ("exit-msg", "exit code 1", "gives up with a message"),
    ("raise", "exit code 1", "raised on purpose"),
    ("keyboard", "signal SIGINT", "KeyboardInterrupt"),
    ("os-exit-7", "exit code 7", None),
])
def test_a_failing_worker_ends_with_the_code_and_message_a_cold_one_would(scene, mode, end, exit_, tail):
    launch, rc = _run(scene, mode, "--end", end, out="out")

    failed = launch.event("generation_failed")
    assert failed["exit"] == exit_, launch.log_summary()
    assert rc == 4
    if tail is not None:
        (log_tail,) = launch.events("worker_log_tail")
        assert tail in log_tail["tail"], log_tail
        if end == "raise":  # the traceback starts in the script, as a fresh interpreter prints it
            assert "Traceback (most recent call last)" in log_tail["tail"] and "runpy" not in log_tail["tail"]
            assert "pai_launch" not in log_tail["tail"] and str(PROBE) in log_tail["tail"]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("end", ["return", "exit-0", "os-exit-0"])
def test_a_worker_that_succeeds_completes_the_run_however_it_leaves(scene, mode, end):
    launch, rc = _run(scene, mode, "--end", end, out="out")

    assert rc == 0, launch.log_summary()
    assert launch.event("generation_ended")["exit"] == "all workers exited 0"
    assert launch.event("run_finished")["reason"] == "training complete"
    assert not launch.events("agent_replaced")


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("end", ["atexit", "thread"])
def test_atexit_handlers_run_and_non_daemon_threads_finish_before_the_worker_exits(scene, mode, end):
    launch, rc = _run(scene, mode, "--end", end, out="out")

    assert rc == 0, launch.log_summary()
    assert sorted(path.name for path in (scene.io / "out").glob(f"{end}-*")) == [f"{end}-0", f"{end}-1"]


def test_per_rank_log_files_hold_each_warm_workers_output(scene, tmp_path):
    logs = tmp_path / "logs"
    launch, rc = _run(scene, "warm", out="out", extra=("--log-dir", str(logs)))

    assert rc == 0, launch.log_summary()
    for rank in (0, 1):
        (stdout,) = logs.glob(f"*/*/generation-1/**/attempt_0/{rank}/stdout.log")
        assert f"probe rank {rank} generation 1 reporting" in stdout.read_text()


FORKED_PARENT = '''
import json, multiprocessing, os, signal, sys

def signalled_then_run(signum, spec):
    os.kill(os.getpid(), signum)  # reaches the fork before run_script has put its handlers back
    from pai_launch.forkserver import worker_main
    worker_main.run_script(spec)

if __name__ == "__main__":
    signum, folder = int(sys.argv[1]), sys.argv[2]
    from multiprocessing import forkserver
    context = multiprocessing.get_context("forkserver")
    os.environ["PAI_LAUNCH_FORKSERVER_PARENT"] = str(os.getpid())  # as the agent arms its server
    forkserver.set_forkserver_preload(["pai_launch.forkserver.server_hooks"])
    forkserver.ensure_running()
    script = os.path.join(folder, "script.py")
    with open(script, "w") as handle:
        handle.write("open(__file__ + '.ran', 'w').close()\\n")
    spec = {"server_pid": forkserver._forkserver._forkserver_pid, "server_env": dict(os.environ),
            "env": dict(os.environ), "cwd": folder, "argv": [script], "module": None, "sys_path": list(sys.path),
            "unbuffered": False, "records": os.path.join(folder, "records")}
    worker = context.Process(target=signalled_then_run, args=(signum, spec))
    worker.start()
    worker.join(30)
    print(json.dumps({"exitcode": worker.exitcode, "ran": os.path.exists(script + ".ran")}))
'''


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_that_reaches_a_warm_worker_as_it_starts_ends_it_before_the_script_runs(tmp_path, signum):
    # The forkserver ignores the stop signals (they are meant for the workers), and a fork starts with its server's
    # handlers: a worker told to stop between its fork and its own set-up used to lose the signal and run on until
    # the SIGKILL at --grace. A fresh interpreter signalled that early dies of it; so must a warm worker.
    parent = tmp_path / "parent.py"
    parent.write_text(FORKED_PARENT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "supervisor"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(parent), str(int(signum)), str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"exitcode": -signum, "ran": False}, done.stderr
