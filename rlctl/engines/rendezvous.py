"""torch.distributed rendezvous stores that listen on one address, never on every interface.

torch's ``TCPStore`` server (what ``init_method="env://"`` and ``tcp://`` rendezvous start on
rank 0) binds the wildcard address whatever ``MASTER_ADDR`` says, and it has no
authentication: anyone who reaches the port can read and write the group's keys. So rank 0
here binds a socket to the given host itself (``127.0.0.1`` for every single-node group rlctl
makes) and hands it to the store (``master_listen_fd``); other ranks connect as usual.

A worker group that starts its ranks as separate processes asks rank 0 for the port first
(:func:`hold_listener`): rank 0 binds it there and then and keeps the socket until its store
takes it over, so no other process can take the port in the seconds before the ranks join (a
port probed by the controller and bound later by rank 0 was taken by a Ray worker in CI).

A multi-node group is an explicit choice: give the host the other nodes reach this one at
(the store then listens on that one address). The wildcard is refused.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from datetime import timedelta
from typing import Any

WILDCARDS = ("", "0.0.0.0", "::", "*")
LOOPBACK_IFNAME = "lo"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) resolves to loopback only."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    return bool(addresses) and all(a.is_loopback for a in addresses)


def keep_collectives_local(host: str) -> None:
    """For a group on loopback, make gloo and NCCL open their own sockets on ``lo`` as well.

    Both otherwise pick the machine's first network interface for the connections between
    ranks, which listen on its address. Values already set in the environment win.
    """
    if is_loopback(host):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", LOOPBACK_IFNAME)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", LOOPBACK_IFNAME)


def interface_of(address: str) -> str | None:
    """The name of this machine's network interface that holds ``address``, if any."""
    import psutil

    wanted = address.strip("[]")
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address.split("%")[0] == wanted for a in addresses):
            return name
    return None


def collectives_on(node_address: str) -> None:
    """For a group that spans nodes: gloo and NCCL open their sockets on the interface that
    holds this node's cluster address (the one the rendezvous store is reached at), not on
    whichever interface they would pick first (loopback when the host name resolves there, a
    management network...). Values already set in the environment win."""
    name = interface_of(node_address)
    if name is None:
        return  # an address of another machine (NAT, a proxy): the libraries' own choice
    os.environ.setdefault("GLOO_SOCKET_IFNAME", name)
    os.environ.setdefault("NCCL_SOCKET_IFNAME", name)


def _listener(host: str, port: int) -> socket.socket:
    if host.strip("[]") in WILDCARDS:
        raise RuntimeError(
            f"refusing to start a rendezvous store on {host!r} (every interface, no "
            "authentication): give the address the other ranks reach this one at, 127.0.0.1 "
            "when they are all on this machine")
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    return sock


_HELD: dict[tuple[str, int], socket.socket] = {}
"""Listening sockets :func:`hold_listener` bound, by ``(host, port)``, until a store takes one."""


def hold_listener(host: str) -> int:
    """Bind and listen on a free port of ``host`` now; the master store of that port takes the
    socket over later in this process (:func:`tcp_store`). Peers that connect before then wait
    in the listen backlog. Returns the port."""
    sock = _listener(host, 0)
    port = int(sock.getsockname()[1])
    _HELD[(host, port)] = sock
    return port


def tcp_store(host: str, port: int, world_size: int, *, is_master: bool, timeout: timedelta) -> Any:
    """A ``TCPStore`` for a group of ``world_size``; the master listens on ``host`` only."""
    import torch.distributed as dist

    if not is_master:
        return dist.TCPStore(host, port, world_size, False, timeout=timeout)
    held = _HELD.pop((host, port), None)
    fd = (held if held is not None else _listener(host, port)).detach()
    # The store owns the descriptor from here on: it closes it, on failure too.
    return dist.TCPStore(host, port, world_size, True, timeout=timeout, master_listen_fd=fd)
