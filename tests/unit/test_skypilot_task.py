"""The SkyPilot task (scripts/skypilot/pai-launch.yaml) is a task SkyPilot takes, and recovers the job on exactly the
exit codes pai-launch documents as a stop from outside (core.exitcodes), never on those no restart can fix.

Its fields are checked by hand against the names and values of SkyPilot's task schema (sky/utils/schemas.py: the
task, its resources, job_recovery and a bucket's file mount); SkyPilot is not installed here. Then what the schema
cannot say: the save folder is on a bucket every node mounts, with the file semantics pai-launch needs, and each
node, given SkyPilot's variables, is its own node of the job at node 0's IP.
"""

from __future__ import annotations

import pytest

from pai_launch.core import exitcodes
from pai_launch.placement import platforms
from tests.k8s import parse_args
from tests.skypilot import NODE_IP, launch_args, load_task, node_envs, run_commands

pytestmark = pytest.mark.timeout(60)

#: SkyPilot's task fields (get_task_schema), a resources' (get_resources_schema) and job_recovery's.
TASK_FIELDS = {"name", "workdir", "event_callback", "num_nodes", "resources", "file_mounts", "service", "pool",
               "setup", "run", "envs", "secrets", "inputs", "outputs", "config", "volumes"}
RESOURCES_FIELDS = {"cloud", "region", "zone", "infra", "cpus", "memory", "accelerators", "instance_type", "use_spot",
                    "job_recovery", "disk_size", "disk_tier", "network_tier", "ports", "labels", "image_id",
                    "autostop", "priority", "any_of", "ordered"}
JOB_RECOVERY_FIELDS = {"strategy", "max_restarts_on_errors", "recover_on_exit_codes"}
STRATEGIES = {"FAILOVER", "EAGER_NEXT_REGION"}
#: A bucket's file mount (get_storage_schema) and its modes (sky.data.storage.StorageMode).
STORAGE_FIELDS = {"name", "source", "store", "persistent", "mode", "config"}
STORAGE_MODES = {"MOUNT", "COPY", "MOUNT_CACHED"}
#: pai-launch's save folder when --save-name is not given (docs: users/usage.md).
DEFAULT_SAVE_NAME = "PAI"


def test_the_task_holds_only_skypilots_fields_with_values_of_their_types():
    task = load_task()
    assert set(task) <= TASK_FIELDS
    assert isinstance(task["name"], str) and isinstance(task["num_nodes"], int) and task["num_nodes"] >= 2
    assert isinstance(task["setup"], str) and isinstance(task["run"], str)
    resources = task["resources"]
    assert set(resources) <= RESOURCES_FIELDS and isinstance(resources["use_spot"], bool)
    name, _, count = str(resources["accelerators"]).partition(":")
    assert name and count.isdigit() and int(count) >= 1
    recovery = resources["job_recovery"]
    assert set(recovery) <= JOB_RECOVERY_FIELDS and recovery["strategy"] in STRATEGIES
    assert isinstance(recovery["max_restarts_on_errors"], int) and recovery["max_restarts_on_errors"] >= 0
    codes = recovery["recover_on_exit_codes"]
    assert all(isinstance(code, int) and 0 <= code <= 255 for code in codes) and len(set(codes)) == len(codes)
    for path, mount in task["file_mounts"].items():
        assert path.startswith("/") and set(mount) <= STORAGE_FIELDS, path
        assert mount["mode"] in STORAGE_MODES and isinstance(mount["name"], str), path


def test_the_job_is_recovered_on_a_stop_from_outside_and_never_on_an_exit_no_restart_can_fix():
    recovery = load_task()["resources"]["job_recovery"]
    assert sorted(recovery["recover_on_exit_codes"]) == sorted(exitcodes.RESTART_RESUMES)
    assert not set(recovery["recover_on_exit_codes"]) & set(exitcodes.RESTART_CANNOT_HELP)
    # Restarts on errors count every failing code alike, so any would restart the codes no restart can fix.
    assert recovery["max_restarts_on_errors"] == 0


def test_pai_launch_ends_run_in_the_bucket_it_keeps_its_save_folder_in_and_its_exit_code_is_the_jobs():
    task = load_task()
    commands = run_commands(task)
    assert commands[0][0] == "cd" and len(commands[0]) == 2
    workdir = commands[0][1]
    assert [words[0] for words in commands[1:]] == ["pai-launch"]  # not exec'd: SkyPilot's own lines follow
    options, script = parse_args(launch_args(task))
    save = str(options.get("--save-name", DEFAULT_SAVE_NAME))
    assert not save.startswith("/") and ".." not in save.split("/")  # inside the working directory
    mount = task["file_mounts"][workdir]
    # pai-launch appends to its event log and renames files into place: MOUNT (streaming) refuses both.
    assert mount["mode"] == "MOUNT_CACHED" and mount.get("persistent", True) is True
    assert script and not script[0].startswith("/"), "the script is in the bucket, at one path on every node"
    assert float(options["--fs-settle"]) >= 60  # a bucket shows one node's files to the others late


def test_each_node_is_its_own_node_of_the_job_at_node_0s_ip_from_skypilots_variables_alone():
    task = load_task()
    options, _ = parse_args(launch_args(task))
    assert not {"--nnodes", "--node-rank", "--rdzv-endpoint", "--local-addr", "--nproc"} & set(options)
    envs = node_envs(task)
    gpus = int(str(task["resources"]["accelerators"]).partition(":")[2])
    for rank, env in enumerate(envs):
        placement = platforms.detect(env)
        assert placement.platform == "SkyPilot"
        assert placement.values == {"nnodes": str(len(envs)), "node_rank": str(rank),
                                    "rdzv_endpoint": f"{NODE_IP.format(2)}:29500",
                                    "local_addr": NODE_IP.format(rank + 2), "nproc": str(gpus)}
