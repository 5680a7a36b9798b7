"""A real run opens no socket that listens beyond loopback (Ray's, torch's, gloo's, ours).

The run's whole process tree is listed while it trains: the driver, Ray's gcs / raylet /
agents and every worker actor (``ray`` mode), or the one process (``--local``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket

import psutil
import pytest

from tests.trainer.cli_runs import SMALL_STEPS, live_run, overrides


def _loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(addr, "ipv4_mapped", None)
    return (mapped or addr).is_loopback


def listening(processes: list[psutil.Process]) -> list[tuple[str, str, int]]:
    """(process name, address, port) of every listening TCP socket and bound UDP socket."""
    out = []
    for p in processes:
        with contextlib.suppress(psutil.Error):
            for c in p.net_connections(kind="inet"):
                if (c.status == psutil.CONN_LISTEN or c.type == socket.SOCK_DGRAM) and c.laddr:
                    out.append((p.name(), c.laddr.ip, c.laddr.port))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("local", [
    False,
    # heavy: a second run; the local store's bind is also checked in tests/security
    pytest.param(True, marks=pytest.mark.heavy),
], ids=["ray", "local"])
def test_every_listening_socket_of_a_run_is_loopback(tmp_path, local):
    settings = overrides("schedule.total_steps=40", *SMALL_STEPS)  # its sockets, not its steps
    if local:
        settings += overrides('data_plane.backend="memory"')
    with live_run(tmp_path, *settings, local=local) as run:
        run.wait_for_steps(1)  # workers up, process group joined, weights synced once
        tree = run.tree()
        sockets = listening(tree)
        ray_procs = [p for p in tree if "raylet" in p.name() or "gcs_server" in p.name()]
        run.proc.terminate()
    assert sockets, "no listening socket found: the listing itself is broken"
    if not local:
        assert ray_procs, [p.name() for p in tree]  # Ray's own processes were listed too
    wide = [s for s in sockets if not _loopback(s[1])]
    assert wide == [], f"listening beyond loopback: {wide}"
