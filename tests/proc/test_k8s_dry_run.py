"""Each pod of the Kubernetes examples (scripts/k8s) starts pai-launch as its node: its arguments, with every $(NAME)
replaced as Kubernetes and the training operator would, and its environment (the image's and the pod's), given to the
real pai-launch with --dry-run in a working directory holding a trivial script. Each must plan without error and say
which node of how many it is, at node 0's endpoint."""

from __future__ import annotations

import pytest

from tests.helpers import launch_env, run_pai_launch
from tests.k8s import Pod, image_env, node_pods

pytestmark = [pytest.mark.proc, pytest.mark.timeout(120)]


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
