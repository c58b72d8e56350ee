"""The platform pai-launch runs on, told apart by its own variables (placement.platforms), and what it says of this
node's place; then the same through the spec builder, where the command line, PAI_LAUNCH_* and PET_* win. Each
platform's variables are the ones it sets (Kubeflow's training operator and Trainer, Volcano's plugins, SageMaker's
training toolkit, Azure Machine Learning, SkyPilot's task runner). Pure: no process."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pai_launch.cli import specbuilder
from pai_launch.cli.specbuilder import build
from pai_launch.placement import platforms
from pai_launch.placement.platforms import PlatformError, detect
from pai_launch.placement.spec import PreflightError
from tests.unit.test_cli import launched, run  # noqa: F401 - the launch command with its run faked
from tests.unit.test_specbuilder import typed

pytestmark = pytest.mark.timeout(60)

POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "HOSTNAME": "ignored"}
#: A PyTorchJob with a Master and two Workers, on worker-1 (the operator's RANK is the pod's place: master 0).
PYTORCHJOB = {**POD, "PYTHONUNBUFFERED": "0", "MASTER_ADDR": "mnist-master-0", "MASTER_PORT": "23456",
              "WORLD_SIZE": "3", "RANK": "2"}
#: A PyTorchJob with an elasticPolicy: only workers, a c10d rendezvous at worker 0, no rank at all.
ELASTIC = {**POD, "PYTHONUNBUFFERED": "0", "PET_RDZV_ENDPOINT": "elastic-worker-0:23456", "PET_RDZV_BACKEND": "c10d",
           "PET_NNODES": "2:3", "PET_MAX_RESTARTS": "3", "PET_NPROC_PER_NODE": "1"}
#: Kubeflow Trainer v2's torch plugin on the second node of a TrainJob.
TRAINER = {**POD, "PET_NNODES": "2", "PET_NPROC_PER_NODE": "auto", "PET_NODE_RANK": "1", "JOB_COMPLETION_INDEX": "1",
           "PET_MASTER_ADDR": "tj-node-0-0.tj", "PET_MASTER_PORT": "29400"}
#: A Volcano job with its pytorch, svc and env plugins, on worker-0 (RANK 1: the master is 0).
VOLCANO = {**POD, "MASTER_ADDR": "vj-master-0.vj", "MASTER_PORT": "23456", "WORLD_SIZE": "3", "RANK": "1",
           "VC_TASK_INDEX": "0", "VK_TASK_INDEX": "0", "VC_MASTER_HOSTS": "vj-master-0.vj",
           "VC_WORKER_HOSTS": "vj-worker-0.vj,vj-worker-1.vj", "VC_MASTER_NUM": "1", "VC_WORKER_NUM": "2"}
SAGEMAKER = {"SM_HOSTS": '["algo-2","algo-1","algo-3"]', "SM_CURRENT_HOST": "algo-2", "SM_NUM_GPUS": "8"}
#: A SkyPilot task of 3 nodes with 8 GPUs each, on the second node: the IPs one a line in rank order, as its runner
#: exports them (and the variables beside them that say nothing of the node's place).
SKYPILOT = {"SKYPILOT_NODE_IPS": "10.0.0.5\n10.0.0.7\n10.0.0.9", "SKYPILOT_NODE_RANK": "1", "SKYPILOT_NUM_NODES": "3",
            "SKYPILOT_NUM_GPUS_PER_NODE": "8", "SKYPILOT_TASK_ID": "sky-managed-2026-01-01-00-00-00-000000_pai_1",
            "SKYPILOT_INTERNAL_JOB_ID": "1"}
#: An Azure Machine Learning PyTorch job (2 instances x 4 processes), on the second instance.
AZUREML = {"AZUREML_RUN_ID": "run_1", "AZUREML_NODE_COUNT": "2", "NODE_RANK": "1", "MASTER_ADDR": "10.0.0.4",
           "MASTER_PORT": "6105", "WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1"}


@pytest.mark.parametrize("env, platform, values", [
    (PYTORCHJOB, "Kubeflow PyTorchJob", {"nnodes": "3", "node_rank": "2", "rdzv_endpoint": "mnist-master-0:23456"}),
    (ELASTIC, "Kubeflow PyTorchJob", {}),
    (TRAINER, "Kubeflow Trainer (JobSet)", {"node_rank": "1"}),
    (VOLCANO, "Volcano", {"nnodes": "3", "node_rank": "1", "rdzv_endpoint": "vj-master-0.vj:23456"}),
    (SAGEMAKER, "SageMaker", {"nnodes": "3", "node_rank": "1", "rdzv_endpoint": "algo-1:7777"}),
    (AZUREML, "Azure Machine Learning", {"nnodes": "2", "node_rank": "1", "rdzv_endpoint": "10.0.0.4:6105"}),
    ({"NODE_RANK": "1", "MASTER_ADDR": "10.0.0.1"}, "the environment",
     {"node_rank": "1", "rdzv_endpoint": "10.0.0.1:29500"}),
    (SKYPILOT, "SkyPilot", {"nnodes": "3", "node_rank": "1", "rdzv_endpoint": "10.0.0.5:29500",
                            "local_addr": "10.0.0.7", "nproc": "8"}),
    # SkyPilot on Kubernetes, a CPU task of one node: no worker count (no GPU), nothing read as a PyTorchJob's.
    ({**POD, "SKYPILOT_NODE_IPS": "10.244.1.7\n", "SKYPILOT_NODE_RANK": "0", "SKYPILOT_NUM_GPUS_PER_NODE": "0",
      "MASTER_ADDR": "10.0.0.1", "RANK": "4", "WORLD_SIZE": "8"}, "SkyPilot",
     {"nnodes": "1", "node_rank": "0", "rdzv_endpoint": "10.244.1.7:29500", "local_addr": "10.244.1.7"}),
    ({"SKYPILOT_NODE_IPS": "fd00::1\nfd00::2", "SKYPILOT_NODE_RANK": "1"}, "SkyPilot",
     {"nnodes": "2", "node_rank": "1", "rdzv_endpoint": "[fd00::1]:29500", "local_addr": "fd00::2"}),
], ids=["pytorchjob", "elastic", "trainer", "volcano", "sagemaker", "azureml", "generic", "skypilot",
        "skypilot-k8s-cpu", "skypilot-ipv6"])
def test_each_platform_is_told_apart_and_read_as_it_means_its_variables(env, platform, values):
    found = detect(env)
    assert (found.platform, found.values) == (platform, values)
    assert set(found.source) == set(values)


@pytest.mark.parametrize("env", [
    {},
    {"RANK": "3", "WORLD_SIZE": "8", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
     "LOCAL_RANK": "1"},  # torchrun's
    {**POD, "RANK": "3", "WORLD_SIZE": "8", "MASTER_ADDR": "10.0.0.1"},  # a pod, but no platform's master service
    {"SM_HOSTS": '["algo-1"]'},
])
def test_rank_and_world_size_of_a_process_are_never_read_as_a_nodes(env):
    assert detect(env) is None


@pytest.mark.parametrize("env, message", [
    ({**VOLCANO, "RANK": "x"}, "RANK 'x' is not a number"),
    ({**SAGEMAKER, "SM_CURRENT_HOST": "algo-9"}, "SM_HOSTS .* holding SM_CURRENT_HOST 'algo-9'"),
    ({**SAGEMAKER, "SM_HOSTS": "algo-1"}, "is not a JSON list"),
    ({**AZUREML, "AZUREML_NODE_COUNT": "-1"}, "AZUREML_NODE_COUNT '-1' is not a number"),
    ({**SKYPILOT, "SKYPILOT_NODE_RANK": "x"}, "SKYPILOT_NODE_RANK 'x' is not a number"),
    ({**SKYPILOT, "SKYPILOT_NODE_IPS": "10.0.0.5\nnode-b\n10.0.0.9"}, "SKYPILOT_NODE_IPS line 2, 'node-b', is not an "
     "IP"),
    ({**SKYPILOT, "SKYPILOT_NUM_NODES": "4"}, "SKYPILOT_NUM_NODES '4' does not count the 3 line"),
    ({**SKYPILOT, "SKYPILOT_NUM_NODES": "three"}, "SKYPILOT_NUM_NODES 'three' is not a number"),
    ({**SKYPILOT, "SKYPILOT_NODE_RANK": "3"}, "SKYPILOT_NODE_RANK '3' has no line among the 3 of SKYPILOT_NODE_IPS"),
    ({**SKYPILOT, "SKYPILOT_NUM_GPUS_PER_NODE": "8.0"}, "SKYPILOT_NUM_GPUS_PER_NODE '8.0' is not a number"),
])
def test_a_platforms_variable_that_cannot_be_right_is_one_line_naming_it(env, message):
    with pytest.raises(PlatformError, match=message) as caught:
        detect(env)
    assert "\n" not in str(caught.value)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(data=st.data())
def test_skypilots_node_ips_give_node_0_the_first_line_and_each_node_its_own(data):
    ips = data.draw(st.lists(st.ip_addresses(v=4).map(str), min_size=1, max_size=8, unique=True), label="ips")
    rank = data.draw(st.integers(0, len(ips) - 1), label="rank")
    gpus = data.draw(st.integers(0, 16), label="gpus")
    separator = data.draw(st.sampled_from(["\n", "\r\n", " \n"]), label="separator")
    env = {"SKYPILOT_NODE_IPS": separator.join(ips) + data.draw(st.sampled_from(["", "\n"])),
           "SKYPILOT_NODE_RANK": str(rank), "SKYPILOT_NUM_GPUS_PER_NODE": str(gpus)}
    if data.draw(st.booleans(), label="counted"):
        env["SKYPILOT_NUM_NODES"] = str(len(ips))
    found = detect(env)
    expected = {"nnodes": str(len(ips)), "node_rank": str(rank), "rdzv_endpoint": f"{ips[0]}:29500",
                "local_addr": ips[rank], **({"nproc": str(gpus)} if gpus else {})}
    assert (found.platform, found.values) == ("SkyPilot", expected)


@pytest.mark.parametrize("env, words", [
    ({**PYTORCHJOB, "RANK": "5", "WORLD_SIZE": "2"}, ("Kubeflow PyTorchJob's", "RANK=5 (the pod's index)",
                                                     "WORLD_SIZE=2 (the job's pod count)", "cannot be right")),
    ({**PYTORCHJOB, "WORLD_SIZE": "0", "RANK": "0"}, ("WORLD_SIZE=0 (the job's pod count)", "cannot be right")),
    ({**TRAINER, "PET_NODE_RANK": "", "JOB_COMPLETION_INDEX": "7"}, ("Kubeflow Trainer (JobSet)'s",
                                                                     "JOB_COMPLETION_INDEX=7 (the pod's index)")),
], ids=["pytorchjob-rank-beyond-world-size", "pytorchjob-world-size-0", "jobset-index-beyond-nnodes"])
def test_a_platform_value_out_of_range_is_named_by_its_variable_not_the_option_it_became(env, words):
    with pytest.raises(PlatformError) as caught:
        build(typed(), host({key: value for key, value in env.items() if value != ""}))
    message = str(caught.value)
    for word in words:
        assert word in message, message
    assert "fix the job's specification, or give the option(s) yourself" in message


@pytest.mark.parametrize("hostname, rendezvous, rank", [
    ("elastic-worker-0", "elastic-worker-0", 0), ("elastic-worker-0.elastic.ns.svc", "elastic-worker-0", 0),
    ("elastic-worker-2", "elastic-worker-0", 2), ("elastic-worker-12", "elastic-worker-0.ns", 12),
    ("other-worker-1", "elastic-worker-0", None), ("node7", "node0", None), ("gpu-3", "gpu-1", None),
])
def test_a_c10d_node_without_a_rank_is_node_0_on_the_rendezvous_host_else_its_pods_index(hostname, rendezvous, rank):
    found = platforms.node_rank_by_host(hostname, rendezvous)
    assert (None if found is None else found[0]) == rank


# --- through the spec builder ----------------------------------------------------------------------------------
def host(env, hostname=""):
    return specbuilder.Host(env=dict(env), physical_gpus=0, workdir=specbuilder.Path("/w"), python="/py",
                            hostname=hostname)


def test_a_platforms_values_fill_only_what_was_not_given_and_the_dry_run_says_where_each_came_from():
    built = build(typed(nnodes="3", rdzv_id="job"), host(VOLCANO))
    nodes = built.spec.nodes
    assert (nodes.max_nodes, nodes.node_rank, nodes.endpoint, nodes.rdzv_id) == (3, 1, "vj-master-0.vj:23456", "job")
    assert built.from_platform == ("from Volcano (detected by VC_TASK_INDEX): --node-rank 1 (RANK, the pod's place: "
                                   "the master 0, worker N N+1); --rdzv-endpoint vj-master-0.vj:23456 (MASTER_ADDR, "
                                   "MASTER_PORT)")
    given = build(typed(nnodes="3", node_rank=2, rdzv_endpoint="h:1"), host(VOLCANO))
    assert (given.spec.nodes.node_rank, given.spec.nodes.endpoint) == (2, "h:1")
    assert given.from_platform == "from Volcano (detected by VC_TASK_INDEX): nothing (every value was given)"


def test_skypilot_places_the_node_and_counts_its_workers_only_where_no_gpu_is_visible():
    built = build(typed(), host(SKYPILOT))
    nodes = built.spec.nodes
    assert (nodes.max_nodes, nodes.node_rank, nodes.endpoint, nodes.local_addr) == (3, 1, "10.0.0.5:29500", "10.0.0.7")
    assert (built.spec.nproc, built.chosen_nproc) == (8, 8)
    assert built.from_platform == (
        "from SkyPilot (detected by SKYPILOT_NODE_RANK and SKYPILOT_NODE_IPS): --nnodes 3 (SKYPILOT_NUM_NODES); "
        "--node-rank 1 (SKYPILOT_NODE_RANK); --rdzv-endpoint 10.0.0.5:29500 (SKYPILOT_NODE_IPS, its first line, port "
        "29500); --local-addr 10.0.0.7 (SKYPILOT_NODE_IPS, the line of SKYPILOT_NODE_RANK); --nproc 8 "
        "(SKYPILOT_NUM_GPUS_PER_NODE)")
    visible = build(typed(), host({**SKYPILOT, "CUDA_VISIBLE_DEVICES": "0,1"}))
    assert (visible.spec.nproc, visible.chosen_nproc) == (2, None) and "--nproc" not in visible.from_platform
    given = build(typed(nproc=4, local_addr="10.1.0.7", rdzv_endpoint="head:1234"), host(SKYPILOT))
    assert (given.spec.nproc, given.spec.nodes.local_addr, given.spec.nodes.endpoint) == (4, "10.1.0.7", "head:1234")
    assert given.from_platform.endswith("--nnodes 3 (SKYPILOT_NUM_NODES); --node-rank 1 (SKYPILOT_NODE_RANK)")


def test_slurm_comes_before_any_other_platform_and_no_slurm_lets_the_platform_speak():
    slurm = {"SLURM_JOB_ID": "77", "SLURM_NNODES": "1", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "n1"}
    built = build(typed(), host({**slurm, **SAGEMAKER}))
    assert (built.spec.nodes.max_nodes, built.from_platform) == (1, None) and built.from_slurm
    built = build(typed(use_slurm=False), host({**slurm, **SAGEMAKER}))
    assert (built.spec.nodes.max_nodes, built.spec.nodes.node_rank) == (3, 1) and built.from_slurm is None


def test_the_environments_own_master_and_node_rank_count_only_in_a_job_of_several_nodes():
    env = {"NODE_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234"}
    assert build(typed(), host(env)).spec.nodes.multi is False
    nodes = build(typed(nnodes="2"), host(env)).spec.nodes
    assert (nodes.node_rank, nodes.endpoint) == (1, "10.0.0.1:1234")


def test_a_c10d_rendezvous_without_a_rank_finds_it_from_the_host_name_or_is_refused():
    options = dict(nnodes="2:3", rdzv_backend="c10d", rdzv_endpoint="elastic-worker-0:23456")
    built = build(typed(**options), host(POD, "elastic-worker-2"))
    assert built.spec.nodes.node_rank == 2
    assert built.from_platform.endswith("--node-rank 2 (the pod's index in its host name, elastic-worker-2, beside "
                                        "the rendezvous host's)")
    assert build(typed(**options), host({}, "elastic-worker-0")).spec.nodes.node_rank == 0
    assert build(typed(**{**options, "rdzv_backend": "static"}), host({}, "x")).spec.nodes.node_rank == 0
    with pytest.raises(PreflightError, match=r"this node's rank is unknown: .* \(gpu7\) .* set PET_NODE_RANK \(or "
                                             r"--node-rank\) on every node, 0 on elastic-worker-0"):
        build(typed(**options), host({}, "gpu7"))
    with pytest.raises(PreflightError, match="--rdzv-backend 'etcd' is not supported"):
        build(typed(rdzv_backend="etcd"), host({}))


def test_one_machine_takes_torchruns_any_free_port_endpoint_as_it_is():
    assert build(typed(rdzv_endpoint="localhost:0", rdzv_backend="c10d"), host({})).spec.nodes.multi is False


# --- the command line, PAI_LAUNCH_* and PET_* over the platform ------------------------------------------------
@pytest.fixture
def environ(monkeypatch):
    """Replace the process's environment for one launch (the command reads os.environ)."""
    def set_to(env):
        for key in [key for key in os.environ if key.startswith(("PET_", "PAI_LAUNCH_", "SLURM_"))]:
            monkeypatch.delenv(key)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
    return set_to


def test_pet_variables_win_over_the_platforms_own_and_the_dry_run_names_both(launched, environ, capsys, monkeypatch):
    monkeypatch.setattr(specbuilder.socket, "gethostname", lambda: "elastic-worker-1")
    environ({**ELASTIC, "PET_MONITOR_INTERVAL": "5"})
    assert run(["--dry-run", "train.py"]) == 0
    spec = launched["spec"]
    nodes = spec.nodes
    assert (nodes.min_nodes, nodes.max_nodes, nodes.node_rank, nodes.endpoint) == (2, 3, 1, "elastic-worker-0:23456")
    assert (spec.nproc, spec.max_failures) == (1, 4)
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "from torchrun's environment: --nnodes 2:3 (PET_NNODES); --nproc 1 (PET_NPROC_PER_NODE); --rdzv-endpoint "
        "elastic-worker-0:23456 (PET_RDZV_ENDPOINT); --rdzv-backend c10d (PET_RDZV_BACKEND); --max-failures 4 "
        "(PET_MAX_RESTARTS)",
        "from Kubeflow PyTorchJob (detected by KUBERNETES_SERVICE_HOST with PET_* or MASTER_ADDR): --node-rank 1 (the "
        "pod's index in its host name, elastic-worker-1, beside the rendezvous host's)"]
    assert sorted(fields["flag"] for _, fields in launched["notes"]) == ["PET_MAX_RESTARTS", "PET_MONITOR_INTERVAL"]


def test_pai_launch_variables_and_the_command_line_win_over_pet_and_take_its_note_with_them(launched, environ):
    environ({"PET_MAX_RESTARTS": "0", "PET_NPROC_PER_NODE": "2", "PET_NNODES": "1", "PAI_LAUNCH_MAX_FAILURES": "7"})
    assert run(["--nproc", "1", "train.py"]) == 0
    assert (launched["spec"].max_failures, launched["spec"].nproc) == (7, 1)
    assert launched["notes"] == []


def test_a_refused_pet_variable_is_one_line_and_exit_2(launched, environ, capsys):
    environ({"PET_RDZV_BACKEND": "etcd"})
    assert run(["train.py"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pai-launch: error: PET_RDZV_BACKEND 'etcd' is not supported") and "\n" not in err
