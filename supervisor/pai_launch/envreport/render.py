"""`pai-launch env`'s facts as aligned `key: value` lines to paste into a bug report, or as JSON with sorted keys.

Pure: the facts dict in (cli.envfacts gathers it), text out. A fact that is unknown says so, and why where the facts
tell (the probe failed, torch is not installed), rather than being left out: a missing line in a report is a question.
"""

from __future__ import annotations

import json

from pai_launch import backends

GIB = 1024**3
#: A Slurm job's hosts named before "...": enough to see the rendezvous host and the list's shape.
SHOWN_HOSTS = 4


def render_json(facts: dict) -> str:
    return json.dumps(facts, indent=2, sort_keys=True)


def render_text(facts: dict) -> str:
    env = facts.get("environment") or {}
    pairs = [*_software(facts), *_gpus(facts), *_machine(facts), *_placement(facts.get("placement") or {}, env),
             *_options(facts.get("options")), ("environment", _environment(env))]
    return aligned(pairs)


def aligned(pairs: list[tuple[str, str]]) -> str:
    """'key: value' lines with the values in one column; a value's further lines are indented to that column."""
    width = max(len(key) for key, _ in pairs) + 2
    lines = []
    for key, value in pairs:
        first, *rest = value.splitlines() or [""]
        lines.append(f"{key + ':':<{width}}{first}".rstrip())
        lines.extend(" " * width + line for line in rest)
    return "\n".join(lines)


def _software(facts: dict) -> list[tuple[str, str]]:
    own, probe = facts["pai_launch"], facts["probe"]
    python = facts.get("python")
    system = facts["system"]
    os_line = " ".join(part for part in (system.get("os"), system.get("kernel"), system.get("machine")) if part)
    pairs = [
        ("pai-launch", f"{own['version']} ({own['python']})"),
        ("python", f"{python['version']} {python['implementation']} ({python['executable']})" if python
         else f"unknown: the probe of {probe['python']} {probe['status']}"),
        ("os", os_line + (f" ({system['distribution']})" if system.get("distribution") else "")),
        ("libc", system.get("libc") or "unknown"),
        ("probe", _probe(probe)),
    ]
    packages = facts.get("packages")
    torch = facts.get("torch")
    for name in ("torch", "torchvision", "perforatedai"):
        if packages is None:
            pairs.append((name, "unknown (the probe failed)"))
        elif name == "torch" and torch is not None:
            pairs.append((name, f"{torch['version']} ({torch['file']})"))
        elif name == "torch" and facts.get("torch_error"):
            installed = f"{packages['torch']} installed, " if packages.get("torch") else ""
            pairs.append((name, f"{installed}not importable: {facts['torch_error']}"))
        else:
            pairs.append((name, packages.get(name) or "not installed"))
    return pairs


def _probe(probe: dict) -> str:
    took = "in" if probe["status"] == "ok" else "after"
    line = f"{probe['status']} {took} {probe['seconds']:.1f} s ({probe['python']})"
    return f"{line}: {probe['detail']}" if probe.get("detail") else line


def _gpus(facts: dict) -> list[tuple[str, str]]:
    torch, gpus = facts.get("torch"), facts["gpus"]
    pairs = []
    if torch is not None:
        built = ", ".join(f"{name} {torch[key]}" for name, key in (("CUDA", "cuda"), ("cuDNN", "cudnn"),
                                                                   ("NCCL", "nccl")) if torch.get(key))
        pairs.append(("cuda", ("available" if torch["cuda_available"] else "not available")
                      + (f"; built with {built}" if built else "; torch built without CUDA")))
        if torch.get("gpus_error"):
            pairs.append(("gpus (torch)", f"unknown: {torch['gpus_error']}"))
        elif torch["cuda_available"]:
            pairs.append(("gpus (torch)", "\n".join(_gpu(gpu) for gpu in torch["gpus"]) or "none"))
        distributed = torch.get("distributed") or {}
        pairs.append(("distributed", "not available" if not distributed.get("available") else
                      ", ".join(f"{name} {'yes' if distributed.get(name) else 'no'}" for name in ("nccl", "gloo"))))
        if distributed.get("nccl"):
            pairs.append(("nccl means", backends.nccl_meaning(torch["version"], torch.get("use_nccl2"))))
    visible = gpus["cuda_visible_devices"]
    driver = f", driver {gpus['driver_version']}" if gpus.get("driver_version") else ""
    pairs += [
        ("CUDA_VISIBLE_DEVICES", "unset" if visible is None else repr(visible) if not visible.strip() else visible),
        ("gpus (driver)", f"{gpus['driver_count']}{driver}" if gpus["driver_count"] or driver
         else "0 (no NVIDIA driver in /proc/driver/nvidia)"),
        ("gpus visible", ",".join(gpus["visible"]) or "none"),
    ]
    return pairs


def _gpu(gpu: dict) -> str:
    return f"{gpu['index']}: {gpu['name']}, {gpu['memory_bytes'] / GIB:.1f} GiB, compute {gpu['capability']}"


def _machine(facts: dict) -> list[tuple[str, str]]:
    cpu, files = facts["cpu"], facts["open_files"]
    cores = f"{cpu['usable_cores']} usable of {cpu['machine_cores']}"
    memory = "unknown" if cpu.get("memory_bytes") is None else f"{cpu['memory_bytes'] / GIB:.1f} GiB"
    limit = files["soft"]
    return [
        ("cpu cores", cores + ("; no cgroup limit" if cpu.get("cgroup_cpu_limit") is None else
                               f"; cgroup limit {cpu['cgroup_cpu_limit']:g} core(s)")),
        ("memory", memory + ("; no cgroup limit" if cpu.get("cgroup_memory_limit_bytes") is None else
                             f"; cgroup limit {cpu['cgroup_memory_limit_bytes'] / GIB:.1f} GiB")),
        ("open files", "unlimited" if limit is None else
         f"{limit} (hard {'unlimited' if files['hard'] is None else files['hard']}): "
         f"holds at most --nproc {files['most_workers']}"),
    ]


def _placement(place: dict, env: dict[str, str]) -> list[tuple[str, str]]:
    job = place.get("slurm_job")
    if place.get("slurm"):
        slurm = f"job {job['job_id']}" if job else "detected"
    elif env.get("SLURM_JOB_ID"):
        slurm = "not used (--no-slurm)"
    else:
        slurm = "not detected (SLURM_JOB_ID is unset)"
    pairs = [("slurm", slurm)]
    if job:
        pairs.append(("slurm job", _job(job)))
    if place.get("taken"):
        pairs.append(("from slurm", "\n".join(place["taken"])))
    if place.get("problem"):
        pairs.append(("launch", f"refused: {place['problem']}"))
    elif place.get("nnodes") is not None:
        nodes = "one node" if place["nnodes"] == "1" else f"node {place['node_rank']} of {place['nnodes']}"
        if place.get("rendezvous"):
            nodes += f", rendezvous store at {place['rendezvous']}"
        if place.get("rdzv_id"):
            nodes += f", rendezvous id {place['rdzv_id']}"
        pairs.append(("placement", nodes))
    return pairs


def _job(job: dict) -> str:
    hosts = ",".join(job["hosts"][:SHOWN_HOSTS]) + (" ..." if len(job["hosts"]) > SHOWN_HOSTS else "")
    gpus = "unset" if job["gpus_on_node"] is None else job["gpus_on_node"]
    return (f"{job['nnodes']} node(s) ({hosts}), this is node {job['node_rank']}; GPUs on this node {gpus}; "
            f"requeued {job['restart_count']} time(s)")


def _options(options: dict | None) -> list[tuple[str, str]]:
    if options is None:
        return []

    def seconds(value: float | None, none: str = "off") -> str:
        return none if value is None else f"{value:g} s"

    return [
        ("nproc", f"{options['nproc']} ({options['nproc_from']})"),
        ("save name", f"{options['save_name']} ({options['save_folder']})"),
        ("gpus", "all visible" if options["gpus"] is None else ",".join(options["gpus"])),
        ("grace", seconds(options["grace"])),
        ("max failures", str(options["max_failures"])),
        ("backoff", f"{seconds(options['backoff'])}, doubling up to {seconds(options['backoff_max'])}"),
        ("stall timeout", seconds(options["stall_timeout"])),
        ("fs settle", seconds(options["fs_settle"])),
        ("rdzv timeout", seconds(options["rdzv_timeout"])),
        ("log format", options["log_format"] + (f", files under {options['log_dir']}" if options["log_dir"] else "")),
        ("workers", ("cold (fresh interpreters)" if options["cold"] else "warm (forked from the forkserver)")
         + ("" if options["cold"] or options["preload"] is None else
            f", preloading {','.join(options['preload']) or 'nothing'}")),
        ("resume from", options["resume_from"] or "what doctor reads in the script, else switch"),
        ("watching", "by polling" if options["poll"] else "inotify"),
        ("metrics", "off" if options["metrics_port"] is None else f"port {options['metrics_port']}"),
        ("workflow", "DataParallel (one process, every GPU)" if options["data_parallel"]
         else "DistributedDataParallel"),
        ("requeue on", options["requeue_on"] or "off"),
    ]


def _environment(env: dict[str, str]) -> str:
    return "\n".join(f"{name}={value}" for name, value in env.items()) or "none of the variables pai-launch reads"
