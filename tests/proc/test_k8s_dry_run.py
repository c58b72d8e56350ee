"""Each pod of the Kubernetes examples (scripts/k8s) starts pai-launch as its node: its arguments, with every $(NAME)
replaced as Kubernetes and the training operator would, and its environment (the image's and the pod's), given to the
real pai-launch with --dry-run in a working directory holding a trivial script. Each must plan without error and say
which node of how many it is, at node 0's endpoint. A Kubeflow Trainer v2 pod is given no placing option at all: it
must find its place in the variables Trainer gives it."""

from __future__ import annotations

import pytest

from tests.helpers import launch_env, run_pai_launch
from tests.k8s import Pod, image_env, node_pods, trainjob_pods

pytestmark = pytest.mark.timeout(120)


def dry_run(pod: Pod, tmp_path):
    work = tmp_path / pod.name
    work.mkdir()
    script = pod.script[0]
    (work / script).write_text("print('trained')\n")
    image = {name: value for name, value in image_env().items() if name.startswith("PAI_LAUNCH_")}
    env = launch_env(tmp_path, {**image, **pod.env})
    launch, _ = run_pai_launch(["--dry-run", *pod.args], cwd=work, env=env, timeout=60, name=pod.name)
    return launch, work


@pytest.mark.parametrize("pod", node_pods(), ids=lambda pod: f"{pod.kind}-{pod.name}")
def test_each_pod_plans_its_node_of_the_job_at_node_0s_endpoint(pod, tmp_path):
    launch, work = dry_run(pod, tmp_path)

    assert launch.popen.returncode == 0, launch.stderr
    endpoint = pod.options["--rdzv-endpoint"]
    assert f"nodes: node {pod.rank} of {pod.nodes}, rendezvous store at {endpoint}" in launch.stdout, launch.stdout
    assert f"save folder: {work / str(pod.options['--save-name'])}" in launch.stdout
    script_line = " ".join(pod.script)
    assert "command: " in launch.stdout and script_line in launch.stdout, launch.stdout
    if pod.rank == 0:
        assert "(this node serves the store)" in launch.stdout and "--perforate_model_parallel" in launch.stdout
    else:
        assert "(node 0 serves the store)" in launch.stdout and "init run: node 0's" in launch.stdout
    assert sorted(path.name for path in work.iterdir()) == [pod.script[0]]  # a dry run writes nothing


@pytest.mark.parametrize("pod", trainjob_pods(), ids=lambda pod: pod.name)
def test_each_trainjob_pod_plans_its_node_at_node_0s_pod_from_trainers_variables_alone(pod, tmp_path):
    launch, work = dry_run(pod, tmp_path)

    assert launch.popen.returncode == 0, launch.stderr
    endpoint = f"{pod.env['PET_MASTER_ADDR']}:{pod.env['PET_MASTER_PORT']}"
    assert f"nodes: node {pod.rank} of {pod.nodes}, rendezvous store at {endpoint}" in launch.stdout, launch.stdout
    assert f"save folder: {work / str(pod.settings['--save-name'])}" in launch.stdout
    assert f"--node-rank {pod.rank} (PET_NODE_RANK)" in launch.stdout, launch.stdout
    assert sorted(path.name for path in work.iterdir()) == [pod.script[0]]
