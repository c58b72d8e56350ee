"""The preflight: a launch specification checked against the command line's own rules and this machine (its
GPUs, open-files limit, tools on PATH, folders, ports) before anything starts. A failure is one line naming the
problem and the fix, and exit code 2 (exitcodes.USAGE).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from pai_launch.cli import scriptfile
from pai_launch.linux import capacity
from pai_launch.placement import options
from pai_launch.placement.spec import LaunchSpec, PreflightError
from pai_launch.savefmt import savedir

NVIDIA_PROC_DIR = Path("/proc/driver/nvidia/gpus")


def physical_gpu_count(proc_dir: Path = NVIDIA_PROC_DIR) -> int:
    """GPUs the NVIDIA driver reports, read from /proc without touching CUDA (0 when there is no driver)."""
    try:
        return sum(1 for entry in proc_dir.iterdir() if entry.is_dir())
    except OSError:
        return 0


def parse_gpu_list(text: str) -> tuple[str, ...]:
    """'0,1,2' -> ('0', '1', '2'); rejects empty items, negatives and duplicates."""
    items = tuple(item.strip() for item in text.split(","))
    if not items or any(not item for item in items):
        raise PreflightError(f"--gpus {text!r} has an empty item: give a comma-separated list such as --gpus 0,1")
    for item in items:
        if not (item.isdigit() or item.startswith(("GPU-", "MIG-"))):
            raise PreflightError(f"--gpus item {item!r} is not a GPU index or UUID: give a list such as --gpus 0,1")
    if len(set(items)) != len(items):
        raise PreflightError(f"--gpus {text!r} names a GPU twice: list each GPU once")
    return items


def visible_gpus(env: dict[str, str], gpus: tuple[str, ...] | None, physical: int) -> tuple[str, ...]:
    """The GPUs this run may use: --gpus, else CUDA_VISIBLE_DEVICES, else every GPU the driver reports."""
    if gpus is not None:
        return gpus
    if "CUDA_VISIBLE_DEVICES" in env:
        listed = tuple(item.strip() for item in env["CUDA_VISIBLE_DEVICES"].split(",") if item.strip())
        # CUDA stops at the first invalid entry; "-1" is the usual way to hide every GPU.
        valid = []
        for item in listed:
            if item.startswith("-"):
                break
            valid.append(item)
        return tuple(valid)
    return tuple(str(index) for index in range(physical))


def default_nproc(visible: tuple[str, ...]) -> int:
    return len(visible) or 1


def preflight(spec: LaunchSpec, *, chosen_nproc: int | None, env: dict[str, str], physical: int,
              open_files: Callable[[], int | None] = capacity.open_files_limit) -> None:
    """Raise PreflightError for the first problem found; touch nothing: the options among themselves first (pure,
    placement.options; `chosen_nproc` as there), then against this machine. `open_files` reads the open-files limit
    (None: unlimited)."""
    options.check(spec, chosen_nproc=chosen_nproc)
    check_machine(spec, env=env, physical=physical, open_files=open_files)


def check_machine(spec: LaunchSpec, *, env: dict[str, str], physical: int,
                  open_files: Callable[[], int | None] = capacity.open_files_limit) -> None:
    """The spec against this machine: the script (module, program), the open-files limit, its GPUs, Slurm's tools, the
    modules to
    preload, the metrics address, the folders to write, torch."""
    scriptfile.check_exists(spec, env)
    too_many = capacity.open_files_problem(spec.nproc, open_files())
    if too_many:
        raise PreflightError(too_many)
    if spec.gpus is not None and physical:
        for item in spec.gpus:
            if item.isdigit() and int(item) >= physical:
                raise PreflightError(f"--gpus names GPU {item} but this machine has {physical}: use indices "
                                     f"0..{physical - 1}")
    visible = visible_gpus(env, spec.gpus, physical)
    if visible and not spec.data_parallel and spec.nproc > len(visible):
        raise PreflightError(
            f"--nproc {spec.nproc} is more than the {len(visible)} visible GPU(s): lower --nproc or add GPUs with "
            "--gpus"
        )
    if spec.requeue_on is not None and spec.nodes.coordinator and shutil.which("scontrol") is None:
        raise PreflightError("--requeue-on needs Slurm's scontrol, which is not on PATH: install slurm-client (in the "
                             "container too) or drop --requeue-on")
    for name in spec.preload or ():
        if importlib.util.find_spec(name.split(".")[0]) is None:
            raise PreflightError(f"--preload {name}: no module {name.split('.')[0]} in this environment: install it "
                                 "or drop it from --preload")
    if spec.metrics_port is not None and not spec.dry_run:
        _check_metrics_address(spec.metrics_host, spec.metrics_port)
    _check_writable_folder(spec.save_dir, "--save-name")
    if spec.log_dir is not None:
        _check_writable_folder(spec.log_dir, "--log-dir")
    complete = savedir.marker_mtime(spec.save_dir) is not None and not spec.fresh
    if not complete and importlib.util.find_spec("torch") is None and not spec.dry_run:
        raise PreflightError(f"torch is not installed for {spec.python}: install it (pip install torch) in this "
                             "environment")


def _check_metrics_address(host: str, port: int) -> None:
    """The metrics address can be bound now (a port taken, or a host not of this machine, is refused up front)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise PreflightError(f"--metrics-host {host}: {exc.strerror or exc}: give an address of this machine, e.g. "
                             "127.0.0.1 or 0.0.0.0") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise PreflightError(f"--metrics-port {port} on {host}: {exc.strerror or exc}: choose another "
                                 "port") from None


def _check_writable_folder(folder: Path, option: str) -> None:
    """The folder is a folder (or can be created), and we can write where it lives."""
    if folder.exists():
        if not folder.is_dir():
            raise PreflightError(f"{option} {folder} exists and is not a folder: choose another name")
        target = folder
    else:
        target = folder.parent
        while not target.exists():
            target = target.parent
        if not target.is_dir():
            raise PreflightError(f"{option} {folder}: {target} is not a folder: choose another path")
    if not os.access(target, os.W_OK | os.X_OK):
        raise PreflightError(f"{option} {folder}: {target} is not writable: fix its permissions or choose another path")
