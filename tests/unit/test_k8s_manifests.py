"""The Kubernetes examples (scripts/k8s) are valid objects and start pai-launch as a job of N nodes should be started.

Schema-checked, with kubernetes-validate's bundled OpenAPI schemas in strict mode (an unknown field is an error), for
the oldest and the newest Kubernetes the examples are meant for: every core object (the Job, the Service, the claim,
the files pod), and each PyTorchJob replica's pod template as a core PodTemplate. The PyTorchJob itself is a custom
resource whose schema (Kubeflow's CRD) is not bundled: its own fields (apiVersion, kind, spec, runPolicy, the replica
specs) are only checked here against the names and values the training operator's v1 API defines, by hand, not
against the CRD's schema. Kubeflow Trainer v2's runtime and TrainJob are checked the same way: the runtime's node Job
as a core Job (its podFailurePolicy included) and each pod the TrainJob makes as a core PodTemplate, against the
schemas; their own fields, and the JobSet's around the Job, by hand against the names Trainer's v1alpha1 API and
JobSet's v1alpha2 API define in every Trainer release from 2.0 to 2.3. The checks run with the network cut off: the
schemas are all in the installed package.

Then what the schemas cannot say: the node count agrees everywhere, each pod gets its own node rank, node 0's
address is the name Kubernetes gives its pod, every pod shares one claim at the save folder, the grace period
outlasts --grace, the probes wait out the rendezvous timeout, the image's entrypoint is what runs, and a job ends at
once on exactly the exit codes pai-launch documents as ones no restart can fix (core.exitcodes).
"""

from __future__ import annotations

import copy
import ipaddress
import re
import socket

import kubernetes_validate
import pytest

from pai_launch.core import exitcodes
from pai_launch.placement import platforms
from tests.k8s import (
    DEFAULT_RDZV_TIMEOUT,
    JOB,
    KUBERNETES_VERSIONS,
    PYTORCH_CONTAINER,
    PYTORCHJOB,
    STORAGE,
    TRAINER_ANCESTOR,
    TRAINER_NODE,
    TRAINER_PORT,
    TRAINER_RUNTIME,
    TRAINJOB,
    dockerfile_instruction,
    expand,
    image_env,
    job_pods,
    load,
    master_port,
    node_pods,
    one,
    parse_args,
    pytorchjob_pods,
    trainer_job,
    trainjob_pods,
)

pytestmark = pytest.mark.timeout(60)

#: How much longer than --grace Kubernetes must wait before SIGKILL: node 0 keeps its store up to 10 s after the
#: workers stopped, and pai-launch sweeps what is left in 2 s (docs: operators/multi-node.md, operators/service.md).
GRACE_MARGIN_S = 15
#: pai-launch's exit codes that no new start can fix (docs: users/exit-codes.md), the only ones that may end a Job at
#: once.
PERMANENT_EXITS = set(exitcodes.RESTART_CANNOT_HELP)
#: kubeflow.org/v1's PyTorchJob fields, from the training operator's API types (release 1.9).
PYTORCHJOB_SPEC_FIELDS = {"runPolicy", "elasticPolicy", "pytorchReplicaSpecs", "nprocPerNode"}
RUN_POLICY_FIELDS = {"cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit",
                     "schedulingPolicy", "suspend", "managedBy"}
REPLICA_SPEC_FIELDS = {"replicas", "template", "restartPolicy"}
REPLICA_RESTART_POLICIES = {"Always", "OnFailure", "Never", "ExitCode"}
CLEAN_POD_POLICIES = {"All", "Running", "None"}
#: trainer.kubeflow.org/v1alpha1's fields that every release from 2.0 to 2.3 accepts (its CRDs), and JobSet
#: v1alpha2's inside a runtime's template (the same CRDs embed them; JobSet's webhook takes these failure reasons).
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
RUNTIME_SPEC_FIELDS = {"mlPolicy", "podGroupPolicy", "template"}
ML_POLICY_FIELDS = {"numNodes", "torch", "mpi"}
JOBSET_SPEC_FIELDS = {"replicatedJobs", "network", "successPolicy", "failurePolicy", "startupPolicy", "suspend",
                      "coordinator", "managedBy", "ttlSecondsAfterFinished"}
NETWORK_FIELDS = {"enableDNSHostnames", "subdomain", "publishNotReadyAddresses"}
FAILURE_POLICY_FIELDS = {"maxRestarts", "restartStrategy", "rules"}
FAILURE_RULE_FIELDS = {"name", "action", "onJobFailureReasons", "targetReplicatedJobs"}
FAILURE_RULE_ACTIONS = {"FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"}
FAILURE_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
JOB_FAILURE_REASONS = {"BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                       "PodFailurePolicy"}
REPLICATED_JOB_FIELDS = {"name", "replicas", "template", "dependsOn"}
TRAINJOB_SPEC_FIELDS = {"runtimeRef", "trainer", "initializer", "suspend", "managedBy"}
RUNTIME_REF_FIELDS = {"name", "apiGroup", "kind"}
TRAINER_FIELDS = {"image", "command", "args", "env", "numNodes", "numProcPerNode", "resourcesPerNode"}


@pytest.fixture
def offline(monkeypatch):
    """No connection and no name lookup can be made while the test runs."""
    def refuse(*args, **kwargs):
        raise AssertionError("the schema check tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def core_objects() -> list[tuple[str, dict]]:
    return [(f"{path.name}: {obj['kind']} {obj['metadata']['name']}", obj) for path in (STORAGE, JOB)
            for obj in load(path)]


def pod_template(template: dict) -> dict:
    """A pod template as the core object that holds one (kind PodTemplate), for the validator."""
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "replica"}, "template": template}


def validate(obj: dict, version: str) -> None:
    kubernetes_validate.validate(obj, version, strict=True)


def trainer_node_job() -> dict:
    """The runtime's node Job as the core Job JobSet makes of it (kind Job), for the validator."""
    template = trainer_job(one(TRAINER_RUNTIME, "ClusterTrainingRuntime"))["template"]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"{one(TRAINJOB, 'TrainJob')['metadata']['name']}-{TRAINER_NODE}-0",
                         **template.get("metadata", {})},
            "spec": template["spec"]}


# --- schemas ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_core_object_is_valid_against_the_kubernetes_schema(offline, version):
    objects = core_objects()
    assert sorted(obj["kind"] for _, obj in objects) == ["Job", "PersistentVolumeClaim", "Pod", "Service"]
    for label, obj in objects:
        try:
            validate(obj, version)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{label} is not a valid Kubernetes {version} object at {list(exc.path)}: {exc.message}")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_each_pytorchjob_replicas_pod_template_is_a_valid_core_pod_template(offline, version):
    replicas = one(PYTORCHJOB, "PyTorchJob")["spec"]["pytorchReplicaSpecs"]
    assert set(replicas) == {"Master", "Worker"}
    for kind, replica in replicas.items():
        try:
            validate(pod_template(replica["template"]), version)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"the {kind} template is not a valid PodTemplateSpec at {list(exc.path)}: {exc.message}")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_trainer_runtimes_node_job_and_each_trainjob_pod_are_valid_core_objects(offline, version):
    objects = [("the runtime's node Job", trainer_node_job())]
    objects += [(f"pod {pod.name}", pod_template({"metadata": {"labels": {"app": "x"}}, "spec": pod.spec}))
                for pod in trainjob_pods()]
    for label, obj in objects:
        try:
            validate(obj, version)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{label} is not valid in Kubernetes {version} at {list(exc.path)}: {exc.message}")


@pytest.mark.parametrize(("change", "complaint"), [
    (lambda job: job["spec"]["podFailurePolicy"]["rules"][0].update(onExitCode={}), "was unexpected"),
    (lambda job: job["spec"].update(backoffLimitPerIndex="4"), "is not of type 'integer'"),
])
def test_the_schema_check_rejects_a_misspelt_or_mistyped_field_of_the_trainer_runtimes_job(offline, change, complaint):
    job = copy.deepcopy(trainer_node_job())
    change(job)
    with pytest.raises(kubernetes_validate.ValidationError) as caught:
        validate(job, KUBERNETES_VERSIONS[-1])
    assert complaint in caught.value.message


@pytest.mark.parametrize(("where", "change", "complaint"), [
    ("job", lambda job: job["spec"]["template"]["spec"].update(terminationGracePeriodSecond=90), "was unexpected"),
    ("job", lambda job: job["spec"].update(completions="two"), "is not of type 'integer'"),
    ("job", lambda job: job["spec"]["template"]["spec"]["containers"][0].pop("name"), "'name' is a required property"),
    ("template", lambda template: template["spec"]["containers"][0].update(arg=["--nnodes=2"]), "was unexpected"),
    ("template", lambda template: template["spec"]["volumes"][0].update(persistentVolumeClaim=[]), "is not of type"),
])
def test_the_schema_check_rejects_a_misspelt_field_a_wrong_type_and_a_missing_one(offline, where, change, complaint):
    if where == "job":
        obj = copy.deepcopy(one(JOB, "Job"))
        change(obj)
    else:
        template = copy.deepcopy(one(PYTORCHJOB, "PyTorchJob")["spec"]["pytorchReplicaSpecs"]["Worker"]["template"])
        change(template)
        obj = pod_template(template)
    with pytest.raises(kubernetes_validate.ValidationError) as caught:
        validate(obj, KUBERNETES_VERSIONS[-1])
    assert complaint in caught.value.message


def test_the_pytorchjobs_own_fields_are_the_training_operators():
    # Checked by hand: the CRD's schema is not bundled with the validator (see the module's docstring).
    job = one(PYTORCHJOB, "PyTorchJob")
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "PyTorchJob"
    assert set(job) == {"apiVersion", "kind", "metadata", "spec"}
    spec = job["spec"]
    assert set(spec) <= PYTORCHJOB_SPEC_FIELDS and "pytorchReplicaSpecs" in spec and "runPolicy" in spec
    # Without an elasticPolicy the operator sets PET_NNODES to the replica count (not MIN:MAX) and PET_NODE_RANK.
    assert "elasticPolicy" not in spec
    assert isinstance(spec["nprocPerNode"], str) and spec["nprocPerNode"].isdigit()
    assert set(spec["runPolicy"]) <= RUN_POLICY_FIELDS
    assert spec["runPolicy"]["cleanPodPolicy"] in CLEAN_POD_POLICIES
    assert isinstance(spec["runPolicy"]["backoffLimit"], int)
    replicas = spec["pytorchReplicaSpecs"]
    assert set(replicas) == {"Master", "Worker"}
    assert replicas["Master"]["replicas"] == 1, "PET_MASTER_ADDR names master 0: one Master, node 0"
    for kind, replica in replicas.items():
        assert set(replica) <= REPLICA_SPEC_FIELDS, kind
        assert isinstance(replica["replicas"], int) and replica["replicas"] >= 1, kind
        assert replica["restartPolicy"] in REPLICA_RESTART_POLICIES, kind
        names = [container["name"] for container in replica["template"]["spec"]["containers"]]
        assert names == [PYTORCH_CONTAINER], f"{kind}: the operator gives its variables to the container named pytorch"


def test_the_pytorchjobs_restart_policy_restarts_a_worker_that_lost_node_0():
    # ExitCode restarts only 128 and above; a Worker whose Master went away exits 1 and must start again.
    for kind, replica in one(PYTORCHJOB, "PyTorchJob")["spec"]["pytorchReplicaSpecs"].items():
        assert replica["restartPolicy"] == "OnFailure", kind
    assert one(PYTORCHJOB, "PyTorchJob")["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"


def test_the_trainer_runtimes_and_trainjobs_own_fields_are_trainers_and_jobsets():
    # Checked by hand: the CRDs' schemas are not bundled with the validator (see the module's docstring).
    runtime, job = one(TRAINER_RUNTIME, "ClusterTrainingRuntime"), one(TRAINJOB, "TrainJob")
    for obj in (runtime, job):
        assert obj["apiVersion"] == TRAINER_API and set(obj) == {"apiVersion", "kind", "metadata", "spec"}
    spec = runtime["spec"]
    assert set(spec) <= RUNTIME_SPEC_FIELDS and set(spec["mlPolicy"]) <= ML_POLICY_FIELDS
    # Trainer 2.3 dropped torch's numProcPerNode and elasticPolicy: an empty torch policy is one every release takes.
    assert spec["mlPolicy"]["torch"] == {} and isinstance(spec["mlPolicy"]["numNodes"], int)
    assert set(spec["template"]) <= {"metadata", "spec"}
    jobset = spec["template"]["spec"]
    assert set(jobset) <= JOBSET_SPEC_FIELDS and set(jobset["network"]) <= NETWORK_FIELDS
    assert set(jobset["failurePolicy"]) <= FAILURE_POLICY_FIELDS
    assert isinstance(jobset["failurePolicy"]["maxRestarts"], int)
    for rule in jobset["failurePolicy"]["rules"]:
        assert set(rule) <= FAILURE_RULE_FIELDS and FAILURE_RULE_NAME.match(rule["name"]), rule
        assert rule["action"] in FAILURE_RULE_ACTIONS and set(rule["onJobFailureReasons"]) <= JOB_FAILURE_REASONS
    for replicated in jobset["replicatedJobs"]:
        assert set(replicated) <= REPLICATED_JOB_FIELDS and replicated.get("replicas", 1) == 1, replicated["name"]
    assert set(job["spec"]) <= TRAINJOB_SPEC_FIELDS and set(job["spec"]["runtimeRef"]) <= RUNTIME_REF_FIELDS
    assert set(job["spec"]["trainer"]) <= TRAINER_FIELDS
    assert isinstance(job["spec"]["trainer"]["numNodes"], int)


def test_trainer_finds_the_runtimes_node_job_and_container_and_the_trainjob_names_the_runtime():
    runtime, job = one(TRAINER_RUNTIME, "ClusterTrainingRuntime"), one(TRAINJOB, "TrainJob")
    assert runtime["metadata"]["labels"]["trainer.kubeflow.org/framework"] == "torch"
    replicated = trainer_job(runtime)
    assert replicated["name"] == TRAINER_NODE  # PET_MASTER_ADDR is <trainjob>-node-0-0: the Job must be node
    assert replicated["template"]["metadata"]["labels"][TRAINER_ANCESTOR[0]] == TRAINER_ANCESTOR[1]
    names = [container["name"] for container in replicated["template"]["spec"]["template"]["spec"]["containers"]]
    assert names == [TRAINER_NODE], "Trainer gives PET_* and the TrainJob's args to the container named node"
    assert job["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                         "name": runtime["metadata"]["name"]}


def test_the_trainjob_ends_at_once_only_on_exits_no_new_pod_can_fix():
    jobset = one(TRAINER_RUNTIME, "ClusterTrainingRuntime")["spec"]["template"]["spec"]
    spec = trainer_job(one(TRAINER_RUNTIME, "ClusterTrainingRuntime"))["template"]["spec"]
    assert spec["template"]["spec"]["restartPolicy"] == "Never" and spec["podReplacementPolicy"] == "Failed"
    assert spec["completionMode"] == "Indexed"
    rules = spec["podFailurePolicy"]["rules"]
    fail = [rule for rule in rules if rule["action"] == "FailJob"]
    assert len(fail) == 1 and fail[0]["onExitCodes"]["operator"] == "In"
    assert fail[0]["onExitCodes"]["containerName"] == TRAINER_NODE
    assert sorted(fail[0]["onExitCodes"]["values"]) == sorted(exitcodes.RESTART_CANNOT_HELP)
    ignored = [rule for rule in rules if rule["action"] == "Ignore"]
    assert [condition["type"] for rule in ignored for condition in rule["onPodConditions"]] == ["DisruptionTarget"]
    # Every other exit counts against its own node's limit, whatever the TrainJob's node count; a node past it fails
    # the Job (no limit for the whole Job, which would not grow with numNodes).
    assert spec["backoffLimitPerIndex"] >= 2 and spec["maxFailedIndexes"] == 0 and "backoffLimit" not in spec
    # A Job its podFailurePolicy failed ends the JobSet at once, however many restarts the JobSet is allowed.
    first = jobset["failurePolicy"]["rules"][0]
    assert (first["action"], first["onJobFailureReasons"]) == ("FailJobSet", ["PodFailurePolicy"])


def test_each_trainjob_pod_is_its_node_of_the_job_by_trainers_variables_at_node_0s_pod():
    runtime, job = one(TRAINER_RUNTIME, "ClusterTrainingRuntime"), one(TRAINJOB, "TrainJob")
    pods, name = trainjob_pods(), job["metadata"]["name"]
    assert len(pods) == job["spec"]["trainer"]["numNodes"] >= 2
    network = runtime["spec"]["template"]["spec"]["network"]
    # The JobSet's headless Service is named after it (no other subdomain), and names pods before they are ready.
    assert network["enableDNSHostnames"] is True and network["publishNotReadyAddresses"] is True
    assert "subdomain" not in network
    node0 = next(pod for pod in pods if pod.rank == 0)
    for pod in pods:
        assert pod.env["PET_MASTER_ADDR"] == f"{node0.name}.{name}" and pod.env["PET_MASTER_PORT"] == str(TRAINER_PORT)
        # Nothing on the command line or in PAI_LAUNCH_* overrides what Trainer's variables say of the node's place.
        assert not {"--nnodes", "--node-rank", "--rdzv-endpoint", "--nproc"} & set(pod.settings), pod.name
        placement = platforms.detect(pod.env)
        assert placement.platform == "Kubeflow Trainer (JobSet)" and placement.values == {"node_rank": str(pod.rank)}
        assert pod.env["PET_NODE_RANK"] == pod.env["JOB_COMPLETION_INDEX"] == str(pod.rank)
    assert sorted(pod.rank for pod in pods) == list(range(len(pods)))


def test_each_trainjob_pod_is_reached_at_its_own_ip_and_runs_one_worker_per_gpu():
    for pod in trainjob_pods():
        assert str(ipaddress.ip_address(pod.settings["--local-addr"])) == pod.settings["--local-addr"]
        source = next(var for var in pod.container["env"] if var["name"] == "PAI_LAUNCH_LOCAL_ADDR")
        assert source["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
        resources = pod.container["resources"]
        assert int(resources["limits"]["nvidia.com/gpu"]) == int(resources["requests"]["nvidia.com/gpu"]) >= 1
        assert pod.env["PET_NPROC_PER_NODE"] == "auto"  # --nproc auto: one worker per GPU the pod gets
        assert pod.spec["enableServiceLinks"] is False, pod.name


# --- pai-launch's command line in every pod -------------------------------------------------------------------------
def test_both_examples_make_one_pod_per_node_with_every_rank_once():
    for pods in (job_pods(), pytorchjob_pods()):
        nodes = pods[0].nodes
        assert nodes >= 2
        assert sorted(pod.rank for pod in pods) == list(range(nodes))
        for pod in pods:
            assert pod.options["--nnodes"] == str(nodes), (pod.name, pod.args)
            assert pod.options["--node-rank"] == str(pod.rank), (pod.name, pod.args)


def test_the_jobs_node_count_is_the_same_in_completions_parallelism_and_nnodes():
    spec = one(JOB, "Job")["spec"]
    assert spec["completionMode"] == "Indexed"
    nnodes = job_pods()[0].options["--nnodes"]
    assert spec["completions"] == spec["parallelism"] == int(nnodes)


def test_the_node_rank_comes_from_the_completion_index_and_the_operators_variables():
    for pod in job_pods():
        node_rank = [arg for arg in pod.raw_args if arg.startswith("--node-rank=")]
        assert node_rank == ["--node-rank=$(JOB_COMPLETION_INDEX)"]
        index = next(var for var in pod.container["env"] if var["name"] == "JOB_COMPLETION_INDEX")
        assert index["valueFrom"]["fieldRef"]["fieldPath"] == \
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    for pod in pytorchjob_pods():
        raw = parse_args(pod.raw_args)[0]
        assert raw["--nnodes"] == "$(PET_NNODES)" and raw["--node-rank"] == "$(PET_NODE_RANK)"
        assert raw["--rdzv-endpoint"] == "$(PET_MASTER_ADDR):$(PET_MASTER_PORT)"


def test_the_endpoint_is_node_0s_pod_through_the_headless_service():
    service, job = one(JOB, "Service"), one(JOB, "Job")
    template = job["spec"]["template"]
    subdomain = template["spec"]["subdomain"]
    assert service["metadata"]["name"] == subdomain
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    node0 = next(pod for pod in job_pods() if pod.rank == 0)
    assert node0.name == f"{job['metadata']['name']}-0"  # an Indexed Job's pod host name: <job>-<index>
    for pod in job_pods():
        host, _, port = pod.options["--rdzv-endpoint"].rpartition(":")
        assert host == f"{node0.name}.{subdomain}", pod.args
        rdzv = [p for p in service["spec"]["ports"] if p["port"] == int(port)]
        assert rdzv and rdzv[0]["targetPort"] in {p["name"] for p in pod.container["ports"] if p["containerPort"]
                                                  == int(port)}


def test_the_pytorchjobs_endpoint_is_the_masters_service_and_port():
    job = one(PYTORCHJOB, "PyTorchJob")
    master = next(pod for pod in pytorchjob_pods() if pod.rank == 0)
    assert master.name == f"{job['metadata']['name']}-master-0"
    ports = {p["name"]: p["containerPort"] for p in master.container["ports"]}
    assert master_port(job) == ports["pytorchjob-port"]  # so PET_MASTER_PORT is the port node 0's store listens on
    for pod in pytorchjob_pods():
        assert pod.options["--rdzv-endpoint"] == f"{master.name}:{ports['pytorchjob-port']}"


def test_every_pod_is_reached_at_its_own_ip():
    for pod in node_pods():
        assert str(ipaddress.ip_address(pod.options["--local-addr"])) == pod.env["POD_IP"]
        source = next(var for var in pod.container["env"] if var["name"] == "POD_IP")
        assert source["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"


def test_the_grace_period_outlasts_pai_launchs_own_stop():
    image_grace = float(image_env()["PAI_LAUNCH_GRACE"])
    for pod in node_pods() + trainjob_pods():
        grace = float(pod.settings.get("--grace", image_grace))
        period = pod.spec["terminationGracePeriodSeconds"]
        assert period - grace >= GRACE_MARGIN_S, f"{pod.name}: SIGKILL {period} s after SIGTERM, --grace {grace}"


def test_every_pod_shares_one_claim_that_holds_the_save_folder():
    claim = one(STORAGE, "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    files = one(STORAGE, "Pod")
    mounted = []
    for name, spec, container, save in [(pod.name, pod.spec, pod.container, str(pod.settings["--save-name"]))
                                        for pod in node_pods() + trainjob_pods()] + [
                                            ("files", files["spec"], files["spec"]["containers"][0], "")]:
        workdir = container["workingDir"]
        volumes = {volume["name"]: volume for volume in spec["volumes"]}
        claims = [(mount["mountPath"], volumes[mount["name"]]["persistentVolumeClaim"]["claimName"])
                  for mount in container["volumeMounts"] if "persistentVolumeClaim" in volumes[mount["name"]]]
        assert len(claims) == 1, name
        path, claim_name = claims[0]
        folder = f"{workdir}/{save}".rstrip("/") if not save.startswith("/") else save
        assert folder == path or folder.startswith(path.rstrip("/") + "/"), f"{name}: {folder} is not on {path}"
        mounted.append((path, claim_name))
    assert set(mounted) == {(dockerfile_instruction("WORKDIR"), claim["metadata"]["name"])}


def test_the_image_runs_pai_launch_as_its_entrypoint_in_its_workdir_as_its_user():
    assert dockerfile_instruction("ENTRYPOINT") == '["pai-launch"]'
    uid = int(dockerfile_instruction("USER").split(":")[0])
    images = set()
    for pod in node_pods() + trainjob_pods():
        assert "command" not in pod.container, f"{pod.name}: the image's entrypoint must be what runs (PID 1)"
        assert pod.container["workingDir"] == dockerfile_instruction("WORKDIR")
        assert pod.spec["securityContext"]["runAsUser"] == uid and pod.spec["securityContext"]["runAsNonRoot"]
        images.add(pod.container["image"])
    images.add(one(STORAGE, "Pod")["spec"]["containers"][0]["image"])
    assert len(images) == 1


def test_no_service_links_can_turn_into_pai_launch_options():
    for pod in node_pods():
        assert pod.spec["enableServiceLinks"] is False, pod.name
        assert not [name for name in pod.env if name.startswith("PAI_LAUNCH_")], pod.name


def test_workers_per_node_match_the_gpus_each_pod_asks_for():
    for pod in node_pods():
        nproc = int(pod.options["--nproc"])
        resources = pod.container["resources"]
        assert int(resources["limits"]["nvidia.com/gpu"]) == int(resources["requests"]["nvidia.com/gpu"]) == nproc
    assert one(PYTORCHJOB, "PyTorchJob")["spec"]["nprocPerNode"] == pytorchjob_pods()[0].options["--nproc"]


def test_probes_ask_livez_on_the_metrics_port_and_wait_out_the_rendezvous():
    for pod in node_pods() + trainjob_pods():
        port = int(pod.settings["--metrics-port"])
        assert pod.settings["--metrics-host"] == "0.0.0.0"  # the kubelet probes the pod's IP
        named = {p["name"]: p["containerPort"] for p in pod.container["ports"]}
        for probe_name in ("startupProbe", "livenessProbe"):
            probe = pod.container[probe_name]["httpGet"]
            assert probe["path"] == "/livez", (pod.name, probe_name)  # never /healthz: a retry is not a dead run
            assert named.get(probe["port"], probe["port"]) == port, (pod.name, probe_name)
        assert "readinessProbe" not in pod.container
        startup = pod.container["startupProbe"]
        timeout = float(pod.settings.get("--rdzv-timeout", DEFAULT_RDZV_TIMEOUT))
        assert startup["periodSeconds"] * startup["failureThreshold"] > timeout, pod.name


def test_the_job_ends_at_once_only_on_exits_no_new_pod_can_fix():
    spec = one(JOB, "Job")["spec"]
    template = spec["template"]["spec"]
    assert template["restartPolicy"] == "Never" and spec["podReplacementPolicy"] == "Failed"
    rules = spec["podFailurePolicy"]["rules"]
    fail = [rule for rule in rules if rule["action"] == "FailJob"]
    assert len(fail) == 1 and fail[0]["onExitCodes"]["operator"] == "In"
    assert fail[0]["onExitCodes"]["containerName"] == template["containers"][0]["name"]
    assert set(fail[0]["onExitCodes"]["values"]) == PERMANENT_EXITS
    ignored = [rule for rule in rules if rule["action"] == "Ignore"]
    assert [condition["type"] for rule in ignored for condition in rule["onPodConditions"]] == ["DisruptionTarget"]
    assert spec["backoffLimit"] >= 2 * spec["completions"]


def test_expand_replaces_defined_names_keeps_undefined_ones_and_unescapes_dollars():
    variables = {"A": "1", "B": "two"}
    assert expand("--x=$(A):$(B)", variables) == "--x=1:two"
    assert expand("$(C)-$$(A)-$$-$", variables) == "$(C)-$(A)-$-$"
