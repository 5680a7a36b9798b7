"""A free loopback TCP port: the one helper for rendezvous and server ports (no torch import)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (its user binds it a moment later).

    Bound on loopback, never on all interfaces: nothing outside the machine is offered a
    socket while the port is probed.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
