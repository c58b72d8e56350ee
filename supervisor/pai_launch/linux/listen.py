"""Where node 0's job store listens: on the address --rdzv-endpoint names, not on every interface.

torch's TCPStore server ignores its host argument and binds every interface; it does take a socket already bound
(master_listen_fd), so the store process binds one here and hands it over. The decision (listen_address) is pure;
bound_socket is the thin OS layer.

- An IP address (127.0.0.1, 10.0.0.1, ::1): exactly that address; one that is not this machine's cannot be bound,
  and the store refuses to start.
- localhost (or a name that resolves only to loopback addresses and is called localhost): the loopback address.
- Any other host name: every interface. The other nodes resolve the name on their machines, possibly to another
  of this machine's addresses than it resolves to here (a Debian host's own name is 127.0.1.1 locally), and node 0
  must be reachable where they look. Give an IP address to listen on one interface only.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

#: listen_address's answer for "every interface", by family.
EVERY_INTERFACE = {socket.AF_INET: "0.0.0.0", socket.AF_INET6: "::"}


def listen_address(host: str, resolved: list[str]) -> str:
    """The address to bind for endpoint host `host`, given what it resolves to here (IP literals resolve to
    themselves)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    addresses = [ipaddress.ip_address(a.split("%")[0]) for a in resolved]
    name = host.lower().rstrip(".")
    if addresses and (name == "localhost" or name.endswith(".localhost")) and all(a.is_loopback for a in addresses):
        return str(next((a for a in addresses if a.version == 4), addresses[0]))
    if addresses and all(a.version == 6 for a in addresses):
        return EVERY_INTERFACE[socket.AF_INET6]
    return EVERY_INTERFACE[socket.AF_INET]


def _resolve(host: str) -> list[str]:
    try:
        return sorted({info[4][0] for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)})
    except socket.gaierror:
        return []


def bound_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on listen_address(host) and `port` (OSError when the port is taken or the address is
    not this machine's)."""
    address = listen_address(host, _resolve(host))
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and address == "::":
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((address, port))
        sock.listen(512)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {address} port {port}: {exc.strerror}") from exc
    sock.set_inheritable(True)
    return sock


def bind_problem(exc: OSError, host: str, port: int) -> str:
    """What went wrong binding, and the fix, for the one-line error."""
    if exc.errno == errno.EADDRNOTAVAIL:
        return (f"{host} is not an address of this machine: give node 0's own address in --rdzv-endpoint "
                "(and start node 0 on the machine it names)")
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} is taken: choose a free port in --rdzv-endpoint (or stop what listens there)"
    return f"{exc.strerror or exc}: check --rdzv-endpoint"


def client_host(sock: socket.socket) -> str:
    """Where the store's own client (torch's master connects to itself) reaches the bound socket."""
    address = sock.getsockname()[0]
    if address == "0.0.0.0":
        return "127.0.0.1"
    if address == "::":
        return "::1"
    return address
