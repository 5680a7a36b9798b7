"""``resources.address`` that answers nothing fails in seconds, naming the address."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from rlctl.run import ray_address
from rlctl.run.ray_address import ClusterUnreachable, check_cluster_address
from tests.trainer.cli_runs import REPO, TINY


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens


def test_nothing_listening_fails_at_once_naming_the_address():
    port = _closed_port()
    started = time.monotonic()
    with pytest.raises(
        ClusterUnreachable, match=rf"resources.address = '127.0.0.1:{port}': nothing answers"
    ):
        check_cluster_address(f"127.0.0.1:{port}")
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("address", ["127.0.0.1", "no-port:", ":6379", "host:port"])
def test_an_address_that_is_not_host_port_is_refused(address):
    with pytest.raises(ClusterUnreachable, match="is not host:port"):
        check_cluster_address(address)


def test_a_port_that_accepts_but_is_not_ray_fails_within_the_handshake_bound(monkeypatch):
    monkeypatch.setattr(ray_address, "HANDSHAKE_TIMEOUT_S", 2.0)
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    port = server.getsockname()[1]
    started = time.monotonic()
    try:
        with pytest.raises(
            ClusterUnreachable, match=rf"127.0.0.1:{port} accepts connections but no Ray"
        ):
            check_cluster_address(f"127.0.0.1:{port}")
    finally:
        server.close()
    assert time.monotonic() - started < 10


@pytest.mark.slow
def test_train_against_a_dead_address_exits_in_seconds_naming_it(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "rlctl",
        "train",
        str(TINY),
        "--quiet",
        "-s",
        f'run.output_dir="{tmp_path}"',
        "-s",
        'resources.address="127.0.0.1:1"',
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    started = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=False)
    took = time.monotonic() - started
    assert out.returncode == 1, out.stderr[-2000:]
    assert "resources.address = '127.0.0.1:1': nothing answers at 127.0.0.1:1" in out.stderr
    assert "Traceback" not in out.stderr
    assert took < 30, took  # interpreter and imports included; ray.init alone waited > 10 min
