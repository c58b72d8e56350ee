"""The job's store, from outside: it listens on the endpoint's address only, a client of its port that does not know
the job's secret can neither stop the job nor forge a node's result, and node 0's store process killed ends every
node at once (exit 1), not after --rdzv-timeout."""

from __future__ import annotations

import json
import stat
import subprocess
import sys

import psutil
import pytest

from tests.helpers import assert_all_gone
from tests.proc.job import start_job, summaries, wait_all
from tests.proc.launch_files import state_dir

pytestmark = pytest.mark.timeout(150)

#: The watch checks the store twice a second; a generous margin on a loaded machine (--rdzv-timeout is 900 s).
LOSS_NOTICED_WITHIN = 60

#: A client of the store's port, as anyone on the network could run it: it lists the keys, raises the stop flag
#: under the names pai-launch used to use and under guesses, and forges node 0's result of generation 1.
OUTSIDER = r"""
import json, sys
from datetime import timedelta
from torch.distributed import TCPStore

store = TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False, wait_for_workers=False, timeout=timedelta(seconds=30))
stop = json.dumps({"signal": 15, "reason": "an outsider"})
forged = json.dumps({"node": 0, "host": "x", "failures": [{"rank": 0, "returncode": 9, "pid": 1, "log_tail": ""}],
                     "error": "forged", "fatal": "forged", "stopping": [15, "an outsider"]})
for key in ("pai/stop", "pai/x/stop", "pai/job/stop", "pai//stop", "pai/j/stop"):
    store.set(key, stop)
for key in ("pai/g1/result/0", "pai/g1/result/1", "pai/x/g1/result/0"):
    store.set(key, forged)
print(json.dumps(store.list_keys()))
"""


def _outsider(port: int) -> list[str]:
    done = subprocess.run([sys.executable, "-c", OUTSIDER, str(port)], capture_output=True, text=True, timeout=60,
                          env={"TORCH_CPP_LOG_LEVEL": "ERROR", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _store_process(node0) -> psutil.Process:
    found = [p for p in psutil.Process(node0.pid).children(recursive=True) if "serve" in p.cmdline()]
    assert len(found) == 1, [p.cmdline() for p in psutil.Process(node0.pid).children(recursive=True)]
    return found[0]


def _everything(nodes) -> list[psutil.Process]:
    found = []
    for node in nodes:
        try:
            found += [psutil.Process(node.pid), *psutil.Process(node.pid).children(recursive=True)]
        except psutil.Error:
            pass
    return found


def test_the_store_listens_only_on_the_endpoints_address_and_its_keys_do_not_give_the_secret_away(scene):
    nodes, port = start_job(scene, 2, "--nproc", "1", script_args=["--hold-until", str(scene.hold_file),
                                                                   "--generations", "1"])
    scene.wait_ready(1, 2)

    listening = [c for c in _store_process(nodes[0]).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert [(c.laddr.ip, c.laddr.port) for c in listening] == [("127.0.0.1", port)], listening
    secret_file = state_dir(scene.work / "PAI") / "coordinator"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    secret = secret_file.read_text().strip()
    assert len(secret) >= 32
    keys = _outsider(port)
    assert keys and not [key for key in keys if secret in key], keys
    scene.hold_file.touch()

    assert wait_all(nodes, 90) == [0, 0], summaries(nodes)


def test_an_outside_client_without_the_secret_can_neither_stop_the_job_nor_forge_a_result(scene):
    # Generation 2 starts after the outsider wrote: entering it checks the stop flag, and generation 1's end reads
    # node 0's result. Both read only what the job's secret sealed.
    nodes, port = start_job(scene, 2, "--nproc", "1", script_args=["--hold-until", str(scene.hold_file),
                                                                   "--generations", "2"])
    scene.wait_ready(1, 2)
    _outsider(port)
    scene.hold_file.touch()

    assert wait_all(nodes, 90) == [0, 0], summaries(nodes)
    for node in nodes:
        assert [e["generation"] for e in node.events("generation_ended")] == [1, 2], node.log_summary()
        assert not {"generation_failed", "generation_stopped",
                    "retry_scheduled"} & set(node.event_names()), node.log_summary()
    assert scene.signals() == {}, "no worker was stopped"


def test_node_0s_store_process_killed_mid_generation_ends_every_node_with_exit_1_naming_the_lost_store(scene):
    nodes, port = start_job(scene, 2, "--nproc", "1", "--backoff", "0.2",
                            script_args=["--hold-until", str(scene.hold_file), "--generations", "3"])
    scene.wait_ready(1, 2)
    everything = _everything(nodes)
    _store_process(nodes[0]).kill()

    # Both within seconds, not after --rdzv-timeout: node 0 sees its store process end, node 1 its watch lose it.
    assert wait_all(nodes, LOSS_NOTICED_WITHIN) == [1, 1], summaries(nodes)
    assert "the job's store process" in nodes[0].event("run_finished")["reason"]
    reason = nodes[1].event("run_finished")["reason"]
    assert f"the job's store at 127.0.0.1:{port} went away" in reason, reason
    for node in nodes:
        assert node.event("job_store_lost")["level"] == "error"
    assert_all_gone(everything, within=10)


@pytest.mark.timeout(60)
def test_node_0_whose_endpoint_is_not_one_of_its_addresses_says_so_and_starts_nothing(scene):
    launch = scene.start("--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "192.0.2.1:29411", "--nproc", "1")

    assert launch.wait(45) == 2, launch.log_summary()
    lines = [line for line in launch.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("pai-launch: error: "), lines
    assert "192.0.2.1 is not an address of this machine" in lines[0] and "give node 0's own address" in lines[0], lines
    assert scene.records() == [] and not (scene.work / "PAI").exists(), "nothing started, nothing written"
