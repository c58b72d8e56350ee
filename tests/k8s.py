"""The Kubernetes examples in scripts/k8s, read as data: their objects, and each pod they make as Kubernetes (and
Kubeflow's training operator) would start it: its environment and its arguments with every $(NAME) replaced.

What the training operator gives a PyTorchJob's containers follows its v1 controller (release 1.9,
pkg/controller.v1/pytorch/envvar.go and master.go): without an elasticPolicy, every container gets PET_NNODES (the
replicas of all types together), PET_NODE_RANK and RANK (0 for the Master, 1 + its index for a Worker),
PET_MASTER_ADDR and MASTER_ADDR (<job>-master-0, the Master's headless Service), PET_MASTER_PORT and MASTER_PORT (the
containerPort named pytorchjob-port of the Master's container named pytorch), PET_NPROC_PER_NODE (spec.nprocPerNode),
WORLD_SIZE (replicas x nprocPerNode) and PYTHONUNBUFFERED.

What Kubeflow Trainer v2 makes of a TrainJob follows its JobSet and torch plugins (releases 2.0 to 2.3,
pkg/runtime/framework/plugins/jobset/builder.go and torch/torch.go): the runtime's replicated Job labelled as the
trainer's runs numNodes pods; its container named node takes the TrainJob's image, command and args where given, its
resourcesPerNode and env, then PET_NNODES (numNodes), PET_NPROC_PER_NODE (auto, or the TrainJob's numProcPerNode),
PET_NODE_RANK (the completion index), PET_MASTER_ADDR (<trainjob>-node-0-0.<trainjob>: node 0's pod through the
JobSet's headless Service) and PET_MASTER_PORT (29500); the Job controller adds JOB_COMPLETION_INDEX.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import REPO

K8S = REPO / "scripts" / "k8s"
STORAGE = K8S / "storage.yaml"
JOB = K8S / "job.yaml"
PYTORCHJOB = K8S / "pytorchjob.yaml"
TRAINER_RUNTIME = K8S / "trainer-v2-runtime.yaml"
TRAINJOB = K8S / "trainer-v2-trainjob.yaml"
DOCKERFILE = REPO / "Dockerfile"
#: The Kubernetes versions the core objects are checked against: the oldest the examples need (podFailurePolicy is
#: GA in 1.31) and the newest kubernetes-validate bundles.
KUBERNETES_VERSIONS = ("1.31", "1.37")
#: The operator's names (kubeflow.org/v1 PyTorchJob).
PYTORCH_CONTAINER = "pytorch"
PYTORCH_PORT_NAME = "pytorchjob-port"
PYTORCH_DEFAULT_PORT = 23456
#: Kubeflow Trainer v2's names: the trainer's Job and container, the label that marks its Job, and node 0's port.
TRAINER_NODE = "node"
TRAINER_ANCESTOR = ("trainer.kubeflow.org/trainjob-ancestor-step", "trainer")
TRAINER_PORT = 29500
#: pai-launch's options as variables (docs: operators/docker.md): PAI_LAUNCH_<NAME> is --<name>.
OPTION_PREFIX = "PAI_LAUNCH_"
#: What `--rdzv-timeout` is when not given (docs: users/usage.md).
DEFAULT_RDZV_TIMEOUT = 900.0
#: Where each pod's IP comes from in these tests (status.podIP): any address, one per pod.
POD_IP = "10.244.{}.10"

_REFERENCE = re.compile(r"\$(\$|\(([A-Za-z_][A-Za-z0-9_.-]*)\))")


def load(path: Path) -> list[dict[str, Any]]:
    """Every object of a manifest file (empty documents left out)."""
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def one(path: Path, kind: str) -> dict[str, Any]:
    found = [document for document in load(path) if document["kind"] == kind]
    assert len(found) == 1, f"{path.name} holds {len(found)} {kind} objects, not one"
    return found[0]


def expand(text: str, variables: dict[str, str]) -> str:
    """Kubernetes' $(NAME) expansion in command, args and env values: a defined NAME is replaced, an undefined one
    is left as it is, and $$ stands for a literal $."""
    def replace(match: re.Match) -> str:
        if match.group(1) == "$":
            return "$"
        return variables.get(match.group(2), match.group(0))

    return _REFERENCE.sub(replace, text)


def image_env() -> dict[str, str]:
    """The Dockerfile's ENV (NAME=VALUE pairs, continued lines joined)."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(pair.split("=", 1) for pair in line[4:].split())
    return env


def dockerfile_instruction(name: str) -> str:
    """The value of the Dockerfile's last NAME instruction."""
    values = [line.split(None, 1)[1] for line in DOCKERFILE.read_text().splitlines() if line.startswith(name + " ")]
    assert values, f"the Dockerfile has no {name}"
    return values[-1].strip()


@dataclass(frozen=True)
class Pod:
    """One pod of a job as Kubernetes starts it."""

    kind: str  # the object that makes it: Job or PyTorchJob
    name: str  # its host name: <job>-<index>, or <job>-master-0 / <job>-worker-<i>
    rank: int  # the node rank it must get
    nodes: int  # the node count of its job
    spec: dict[str, Any]  # its pod spec
    env: dict[str, str]  # what its container's variables resolve to (its own and the ones the operator adds)

    @property
    def container(self) -> dict[str, Any]:
        containers = self.spec["containers"]
        assert len(containers) == 1, f"{self.name}: one container expected"
        return containers[0]

    @property
    def raw_args(self) -> list[str]:
        return [str(arg) for arg in self.container["args"]]

    @property
    def args(self) -> list[str]:
        """pai-launch's arguments after Kubernetes replaced every $(NAME)."""
        return [expand(arg, self.env) for arg in self.raw_args]

    @property
    def options(self) -> dict[str, str | bool]:
        return parse_args(self.args)[0]

    @property
    def script(self) -> list[str]:
        """The script and its arguments."""
        return parse_args(self.args)[1]

    @property
    def settings(self) -> dict[str, str | bool]:
        """The options pai-launch runs with: its PAI_LAUNCH_* variables as options, those on the command line over
        them."""
        from_env = {"--" + name[len(OPTION_PREFIX):].lower().replace("_", "-"): value
                    for name, value in self.env.items() if name.startswith(OPTION_PREFIX)}
        return {**from_env, **self.options}


def parse_args(args: list[str]) -> tuple[dict[str, str | bool], list[str]]:
    """pai-launch's options (each written --name=value, or --flag alone) and what follows them: SCRIPT [ARGS]."""
    options: dict[str, str | bool] = {}
    for position, arg in enumerate(args):
        if not arg.startswith("-"):
            return options, args[position:]
        assert arg.startswith("--"), f"{arg}: write options in full, as --name=value"
        name, equals, value = arg.partition("=")
        assert name not in options, f"{name} given twice"
        options[name] = value if equals else True
    raise AssertionError(f"no script in {args}")


def _field(path: str, *, name: str, rank: int, annotations: dict[str, str]) -> str:
    """A downward-API fieldRef's value in the pod `name`."""
    annotation = re.fullmatch(r"metadata\.annotations\['([^']+)'\]", path)
    if annotation:
        assert annotation.group(1) in annotations, f"{name}: no annotation {annotation.group(1)}"
        return annotations[annotation.group(1)]
    values = {"status.podIP": POD_IP.format(rank), "metadata.name": name, "metadata.namespace": "default"}
    assert path in values, f"{name}: a fieldRef these tests do not model: {path}"
    return values[path]


def container_env(container: dict[str, Any], *, name: str, rank: int, annotations: dict[str, str],
                  added: dict[str, str], added_wins: bool) -> dict[str, str]:
    """The container's variables in order (a value may use the ones before it), then the ones the platform adds:
    appended after them (the training operator: the last of two with one name wins), or only where the container
    has none of that name (the Job controller's JOB_COMPLETION_INDEX)."""
    env: dict[str, str] = {}
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = expand(str(variable["value"]), env)
        else:
            field = variable["valueFrom"]["fieldRef"]["fieldPath"]
            env[variable["name"]] = _field(field, name=name, rank=rank, annotations=annotations)
    for key, value in added.items():
        if added_wins or key not in env:
            env[key] = value
    return env


def job_pods() -> list[Pod]:
    """The Indexed Job's pods: index i is host pai-train-<i>, annotated with its completion index."""
    job = one(JOB, "Job")
    name, spec = job["metadata"]["name"], job["spec"]
    pods = []
    for index in range(spec["completions"]):
        annotations = {"batch.kubernetes.io/job-completion-index": str(index)}
        pod_spec = spec["template"]["spec"]
        host = f"{name}-{index}"
        env = container_env(pod_spec["containers"][0], name=host, rank=index, annotations=annotations,
                            added={"JOB_COMPLETION_INDEX": str(index)}, added_wins=False)
        pods.append(Pod("Job", host, index, spec["completions"], pod_spec, env))
    return pods


def master_port(pytorchjob: dict[str, Any]) -> int:
    """PET_MASTER_PORT: the Master container's port named pytorchjob-port (the operator's default when none is)."""
    template = pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    for container in template["spec"]["containers"]:
        if container["name"] == PYTORCH_CONTAINER:
            for port in container.get("ports", []):
                if port.get("name") == PYTORCH_PORT_NAME:
                    return int(port["containerPort"])
    return PYTORCH_DEFAULT_PORT


def pytorchjob_pods() -> list[Pod]:
    """The PyTorchJob's pods, Master first, each with the variables the training operator adds."""
    job = one(PYTORCHJOB, "PyTorchJob")
    name, spec = job["metadata"]["name"], job["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    total = sum(int(replica.get("replicas", 1)) for replica in replicas.values())
    nproc = spec.get("nprocPerNode", "auto")
    world = total * (int(nproc) if str(nproc).isdigit() else 1)
    address, port = f"{name}-master-0", str(master_port(job))
    pods = []
    for kind, first_rank in (("Master", 0), ("Worker", 1)):
        replica = replicas.get(kind)
        for index in range(int(replica.get("replicas", 1)) if replica else 0):
            rank = first_rank + index
            host = f"{name}-{kind.lower()}-{index}"
            added = {"PYTHONUNBUFFERED": "1", "MASTER_PORT": port, "PET_MASTER_PORT": port, "MASTER_ADDR": address,
                     "PET_MASTER_ADDR": address, "WORLD_SIZE": str(world), "RANK": str(rank),
                     "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": str(nproc), "PET_NNODES": str(total)}
            pod_spec = replica["template"]["spec"]
            env = container_env(pod_spec["containers"][0], name=host, rank=rank, annotations={}, added=added,
                                added_wins=True)
            pods.append(Pod("PyTorchJob", host, rank, total, pod_spec, env))
    return pods


def trainer_job(runtime: dict[str, Any]) -> dict[str, Any]:
    """The runtime's replicated Job that Trainer runs the TrainJob's trainer in (the one labelled as its)."""
    key, value = TRAINER_ANCESTOR
    found = [job for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]
             if job["template"].get("metadata", {}).get("labels", {}).get(key) == value]
    assert len(found) == 1, f"{len(found)} replicated Jobs labelled {key}: {value}"
    return found[0]


def trainjob_pods() -> list[Pod]:
    """The TrainJob's pods, one per node, as Trainer's JobSet and torch plugins and the Job controller start them."""
    runtime, job = one(TRAINER_RUNTIME, "ClusterTrainingRuntime"), one(TRAINJOB, "TrainJob")
    name, trainer = job["metadata"]["name"], job["spec"].get("trainer", {})
    nodes = int(trainer.get("numNodes", runtime["spec"]["mlPolicy"].get("numNodes", 1)))
    replicated = trainer_job(runtime)
    pod_spec = copy.deepcopy(replicated["template"]["spec"]["template"]["spec"])
    container = next(c for c in pod_spec["containers"] if c["name"] == TRAINER_NODE)
    container.update({key: trainer[key] for key in ("image", "command", "args") if key in trainer})
    if "resourcesPerNode" in trainer:
        container["resources"] = trainer["resourcesPerNode"]
    names = {variable["name"] for variable in trainer.get("env", [])}
    container["env"] = [v for v in container.get("env", []) if v["name"] not in names] + trainer.get("env", [])
    pods = []
    for index in range(nodes):
        host = f"{name}-{replicated['name']}-0-{index}"
        added = {"PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": str(trainer.get("numProcPerNode", "auto")),
                 "PET_NODE_RANK": str(index), "PET_MASTER_ADDR": f"{name}-{TRAINER_NODE}-0-0.{name}",
                 "PET_MASTER_PORT": str(TRAINER_PORT)}
        env = container_env(container, name=host, rank=index, annotations={}, added=added, added_wins=True)
        env.setdefault("JOB_COMPLETION_INDEX", str(index))
        pods.append(Pod("TrainJob", host, index, nodes, pod_spec, env))
    return pods


def node_pods() -> list[Pod]:
    """Every training pod of both examples."""
    return job_pods() + pytorchjob_pods()
