"""Two "hosts" on one machine: network namespaces joined by a veth pair, each with its own address and host name,
both seeing the same file system (the shared save folder). Needs root and iproute2's `ip`, like the CI machine."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

NAMESPACES = ("pai-test-h0", "pai-test-h1")
LINKS = ("pai-test-v0", "pai-test-v1")
ADDRESSES = ("10.231.7.1", "10.231.7.2")


@dataclass(frozen=True)
class Host:
    namespace: str
    link: str
    address: str
    hostname: str

    def prefix(self) -> list[str]:
        """Run a command "on" this host: in its namespace, under its own host name, gloo on its own link."""
        return ["ip", "netns", "exec", self.namespace, "unshare", "--uts", "sh", "-c",
                f'hostname {self.hostname} && exec env GLOO_SOCKET_IFNAME={self.link} "$@"', "sh"]


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True, timeout=30)


def remove() -> None:
    for namespace in NAMESPACES:
        _ip("netns", "del", namespace, check=False)  # the veth pair goes with it


def missing_tools() -> str:
    """Why the two hosts cannot be made here ('' when they can)."""
    if shutil.which("ip") is None or shutil.which("unshare") is None or os.geteuid() != 0:
        return "two-host tests need root, iproute2's `ip` and util-linux's `unshare` (./scripts/test.sh installs them)"
    return ""


def create() -> tuple[Host, Host]:
    if missing_tools():
        raise RuntimeError(missing_tools())
    remove()
    for namespace in NAMESPACES:
        _ip("netns", "add", namespace)
    _ip("link", "add", LINKS[0], "type", "veth", "peer", "name", LINKS[1])
    hosts = []
    for index, (namespace, link, address) in enumerate(zip(NAMESPACES, LINKS, ADDRESSES)):
        _ip("link", "set", link, "netns", namespace)
        _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", link)
        _ip("-n", namespace, "link", "set", link, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        hosts.append(Host(namespace, link, address, f"host{index}"))
    return hosts[0], hosts[1]
