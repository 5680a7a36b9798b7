"""torch.distributed rendezvous stores rlctl starts listen on loopback, not every interface."""

from __future__ import annotations

import errno
import os
import socket
from datetime import timedelta

import psutil
import pytest

from rlctl.engines.distributed import free_port
from rlctl.engines.rendezvous import hold_listener, is_loopback, keep_collectives_local, tcp_store


def _listening(pid: int) -> list[tuple[str, int]]:
    return [(c.laddr.ip, c.laddr.port) for c in psutil.Process(pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN]


def test_the_master_store_listens_on_the_given_address_only():
    port = free_port()
    store = tcp_store("127.0.0.1", port, 1, is_master=True, timeout=timedelta(seconds=10))
    store.set("k", "v")
    mine = [ip for ip, p in _listening(os.getpid()) if p == port]
    assert mine == ["127.0.0.1"], mine  # torch's own store listens on "*" / "::"
    client = tcp_store("127.0.0.1", port, 1, is_master=False, timeout=timedelta(seconds=10))
    assert client.get("k") == b"v"


def test_a_held_port_is_nobody_elses_until_the_store_takes_it_over():
    # what rank 0 of a Ray worker group does before the other ranks learn the port
    port = hold_listener("127.0.0.1")
    assert _listening(os.getpid()).count(("127.0.0.1", port)) == 1
    with socket.socket() as other, pytest.raises(OSError) as taken:
        other.bind(("127.0.0.1", port))
    assert taken.value.errno == errno.EADDRINUSE
    # a connection that arrives before the store exists waits in the backlog and does not
    # keep the store from taking the socket over and serving the ranks
    early = socket.create_connection(("127.0.0.1", port), timeout=5)
    store = tcp_store("127.0.0.1", port, 1, is_master=True, timeout=timedelta(seconds=10))
    store.set("k", "v")
    client = tcp_store("127.0.0.1", port, 1, is_master=False, timeout=timedelta(seconds=10))
    assert client.get("k") == b"v"
    assert _listening(os.getpid()).count(("127.0.0.1", port)) == 1  # the held socket, reused
    early.close()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", ""])
def test_a_wildcard_store_is_refused(host):
    with pytest.raises(RuntimeError, match="every interface"):
        tcp_store(host, free_port(), 1, is_master=True, timeout=timedelta(seconds=2))


def test_loopback_detection_and_collective_interfaces(monkeypatch):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("10.1.2.3") and not is_loopback("0.0.0.0")
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        monkeypatch.delenv(var, raising=False)
    keep_collectives_local("10.1.2.3")  # an explicit multi-node address: leave interfaces alone
    assert "GLOO_SOCKET_IFNAME" not in os.environ
    keep_collectives_local("127.0.0.1")
    assert os.environ["GLOO_SOCKET_IFNAME"] == os.environ["NCCL_SOCKET_IFNAME"] == "lo"

