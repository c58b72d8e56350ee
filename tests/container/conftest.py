"""The container tier's session fixtures: a Debian base image made here (no registry serves one), the project's
Dockerfile built on it once per test session with rootful podman, and a way to run it.

Everything specific to this machine stays here, never in the Dockerfile: the host's pip configuration (its
certificate bundle, its local wheel folders and file:// indexes) is mounted read-only into the build, so pip in
the build finds what pip outside it does (the CPU torch wheel, for one). Podman needs root here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

BASE_IMAGE = "localhost/pai-launch-test-base:bookworm"
IMAGE = "localhost/pai-launch:test"
#: What podman needs on this kind of machine: runc (crun fails on hybrid cgroups) and rlimits it may set.
PODMAN_RUN = ["podman", "run", "--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
TOOLS_HINT = "apt-get install podman runc catatonit debootstrap (./scripts/test.sh does, as root)"


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=check)


def _require_tools() -> None:
    if os.geteuid() != 0:
        pytest.skip("rootful podman needs root")
    missing = [tool for tool in ("podman", "runc", "debootstrap") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: {TOOLS_HINT}")


def _debian_mirror() -> str:
    """The Debian mirror apt already uses (debootstrap fetches the base system from it)."""
    for path in (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")):
        if path.exists():
            found = re.search(r"(?:URIs:\s*|deb\s+)(https?://\S+/debian)\b", path.read_text())
            if found:
                return found.group(1)
    return "http://deb.debian.org/debian"


def _host_pip_config() -> dict[str, str]:
    """pip's settings on this machine (files and environment), e.g. {"cert": ..., "find-links": ...}."""
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    settings = {}
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        settings[key.rsplit(".", 1)[-1]] = value.strip().strip("'\"")
    return settings


def pip_build_mounts(folder: Path) -> list[str]:
    """`-v` options that hand the host's pip certificate, wheel folders and file:// indexes to the build."""
    settings = _host_pip_config()
    mounts, lines = [], ["[global]"]
    cert = settings.get("cert")
    if cert and Path(cert).is_file():
        mounts += ["-v", f"{cert}:/run/pai-build/ca.crt:ro"]
        lines.append("cert = /run/pai-build/ca.crt")
    links = [item for item in settings.get("find-links", "").split() if Path(item).is_dir()]
    indexes = [item for item in settings.get("extra-index-url", "").split() if item.startswith("file://")]
    for index, folder_path in enumerate(links):
        mounts += ["-v", f"{folder_path}:/run/pai-build/links-{index}:ro"]
    for index, url in enumerate(indexes):
        # An index's pages point at files beside it (../../files/...): hand over its parent folder.
        where = Path(url[len("file://"):].rstrip("/"))
        mounts += ["-v", f"{where.parent}:/run/pai-build/index-{index}:ro"]
    if links:
        lines.append("find-links = " + " ".join(f"/run/pai-build/links-{i}" for i in range(len(links))))
    if indexes:
        lines.append("extra-index-url = " + " ".join(f"file:///run/pai-build/index-{i}/{Path(url.rstrip('/')).name}"
                                                     for i, url in enumerate(indexes)))
    conf = folder / "pip.conf"
    conf.write_text("\n".join(lines) + "\n")
    return [*mounts, "-v", f"{conf}:/etc/pip.conf:ro"]


@pytest.fixture(scope="session")
def base_image(tmp_path_factory) -> str:
    """A minimal Debian bookworm image (debootstrap --variant=minbase, podman import), kept between sessions."""
    _require_tools()
    if podman("image", "exists", BASE_IMAGE, check=False).returncode == 0:
        return BASE_IMAGE
    rootfs = tmp_path_factory.mktemp("base") / "rootfs"
    subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), _debian_mirror()], check=True,
                   capture_output=True, timeout=600)
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(["podman", "import", "-", BASE_IMAGE], stdin=tar.stdout, check=True, capture_output=True,
                   timeout=300)
    tar.wait(timeout=60)
    shutil.rmtree(rootfs, ignore_errors=True)
    return BASE_IMAGE


def build_project_image(base: str, tag: str, folder: Path) -> None:
    """`podman build` of the project's Dockerfile on `base`, with the host's pip configuration (`folder`: scratch)."""
    build = subprocess.run(
        ["podman", "build", "--format", "docker", "--runtime", "runc", "--network", "host",
         "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "--build-arg", f"BASE={base}",
         *pip_build_mounts(folder), "-t", tag, str(REPO)],
        capture_output=True, text=True, timeout=1200)
    assert build.returncode == 0, f"podman build failed:\n{build.stdout[-4000:]}\n{build.stderr[-4000:]}"


@pytest.fixture(scope="session")
def image(base_image, tmp_path_factory) -> str:
    """The project's Dockerfile, built once per session on the Debian base (the CPU torch wheel); removed afterwards."""
    build_project_image(base_image, IMAGE, tmp_path_factory.mktemp("build"))
    yield IMAGE
    podman("rmi", "-f", IMAGE, check=False)
    podman("image", "prune", "-f", check=False)


# --- the default base's torch -----------------------------------------------------------------------
#: The Dockerfile's default BASE, e.g. pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime: its torch version is its tag's.
DEFAULT_BASE = re.search(r"^ARG BASE=(\S+)$", (REPO / "Dockerfile").read_text(), re.M).group(1)
DEFAULT_BASE_TORCH = re.match(r"pytorch/pytorch:(\d+\.\d+\.\d+)-", DEFAULT_BASE).group(1)
#: The torchvision each torch was released with (each torchvision pins one torch).
TORCHVISION_FOR = {"2.4.1": "0.19.1", "2.7.1": "0.22.1", "2.13.0": "0.28.0"}
TORCH_BASE_IMAGE = f"localhost/pai-launch-test-torch-base:{DEFAULT_BASE_TORCH}"
DEFAULT_BASE_IMAGE = "localhost/pai-launch:test-default-base"
#: A stand-in for the registry's PyTorch image: Debian's Python 3.11 (as in that image) with the same torch and
#: torchvision installed into the system's site-packages, where the Dockerfile's venv (--system-site-packages) sees
#: them.
TORCH_BASE_CONTAINERFILE = """\
FROM {base}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \\
        python3-pip ca-certificates && rm -rf /var/lib/apt/lists/*
RUN pip install --break-system-packages --no-cache-dir --no-index --find-links /run/pai-wheels \\
        torch=={torch} torchvision=={torchvision} && python3 -c "import torch, torchvision"
"""


def _wheelhouse(torch: str, torchvision: str) -> Path:
    """torch and torchvision wheels for the base's Python (3.11), downloaded once and kept with the test venvs."""
    cache = Path(os.environ.get("PAI_LAUNCH_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                 / "pai-launch")
    folder = cache / "wheels" / f"torch-{torch}-cp311"
    done_mark = folder / ".complete"
    if not done_mark.exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                        "--only-binary=:all:",
                        "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--platform",
                        "manylinux2014_x86_64",
                        "--platform", "manylinux1_x86_64", "-d", str(folder), f"torch=={torch}",
                        f"torchvision=={torchvision}"],
                       check=True, capture_output=True, timeout=1200)
        done_mark.write_text("")
    return folder


@pytest.fixture(scope="session")
def default_base_image(base_image, tmp_path_factory) -> str:
    """The Dockerfile built on a base like its default one (that torch already installed), with no build arguments
    but BASE: what `docker build .` makes. The torch base is kept between sessions; the image is removed afterwards."""
    folder = tmp_path_factory.mktemp("default-base")
    if podman("image", "exists", TORCH_BASE_IMAGE, check=False).returncode != 0:
        torchvision = TORCHVISION_FOR[DEFAULT_BASE_TORCH]
        wheels = _wheelhouse(DEFAULT_BASE_TORCH, torchvision)
        (folder / "Containerfile").write_text(TORCH_BASE_CONTAINERFILE.format(base=base_image, torch=DEFAULT_BASE_TORCH,
                                                                              torchvision=torchvision))
        build = subprocess.run(
            ["podman", "build", "--format", "docker", "--runtime", "runc", "--network", "host", "-v",
             f"{wheels}:/run/pai-wheels:ro", *pip_build_mounts(folder), "-t", TORCH_BASE_IMAGE, str(folder)],
            capture_output=True, text=True, timeout=1800)
        assert build.returncode == 0, f"the torch base did not build:\n{build.stdout[-4000:]}\n{build.stderr[-4000:]}"
    build_project_image(TORCH_BASE_IMAGE, DEFAULT_BASE_IMAGE, folder)
    yield DEFAULT_BASE_IMAGE
    podman("rmi", "-f", DEFAULT_BASE_IMAGE, check=False)
