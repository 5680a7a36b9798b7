"""Check that ``resources.address`` answers before ``ray.init`` joins it.

``ray.init(address=...)`` on an address where nothing listens retries inside Ray's C++ client
for many minutes and does not see Ctrl-C (measured: over 10 minutes for ``127.0.0.1:1``).
So first a plain TCP connect (seconds, interruptible), then the GCS handshake Ray itself
starts with, run on a daemon thread and waited for in short slices, so the check is bounded
and Ctrl-C works whatever Ray's client does. Both failures name the address.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

CONNECT_TIMEOUT_S = 5.0
HANDSHAKE_TIMEOUT_S = 15.0


class ClusterUnreachable(RuntimeError):
    """No Ray cluster answers at ``resources.address``."""


def _split(address: str) -> tuple[str, int, bool] | None:
    """``(host, port, is_ray_client)`` of an address, or ``None`` for ``auto`` / ``local``."""
    text = address.strip()
    client = text.startswith("ray://")
    text = text.removeprefix("ray://")
    if text in ("auto", "local", ""):
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ClusterUnreachable(
            f"resources.address = {address!r} is not host:port (e.g. \"10.0.0.5:6379\" or "
            "\"ray://10.0.0.5:10001\"); leave it unset to start a private local cluster")
    return host.strip("[]"), int(port), client


def _resolve_auto(address: str) -> str | None:
    """The address ``auto`` stands for (``RAY_ADDRESS`` or the last cluster started here)."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # private API moved: let ray.init resolve it
        return None
    try:
        return canonicalize_bootstrap_address(address)
    except (ValueError, ConnectionError, OSError):  # ray.init reports these itself
        return None


def check_cluster_address(address: str) -> None:
    """Raise :class:`ClusterUnreachable` unless a Ray cluster answers at ``address``."""
    parts = _split(address)
    if parts is None and address.strip() == "auto":
        resolved = _resolve_auto(address)
        parts = _split(resolved) if resolved else None
    if parts is None:
        return  # "local", or "auto" with nothing to find: ray.init says so at once
    host, port, client = parts
    fix = ("start the cluster (`ray start --head` on that machine), correct resources.address, "
           "or leave it unset to start a private local cluster")
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ClusterUnreachable(
            f"resources.address = {address!r}: nothing answers at {host}:{port} ({why}, "
            f"checked for {CONNECT_TIMEOUT_S:.0f} s); {fix}") from None
    if client:
        return  # Ray Client (ray://) connects with its own bounded retries
    _handshake(address, f"{host}:{port}", fix)


def _handshake(address: str, host_port: str, fix: str) -> None:
    """Ray's first GCS request, bounded (a port that is open but not a GCS never answers)."""
    try:
        from ray._raylet import GcsClient
    except ImportError:  # private API moved: the TCP check above is all we can do
        return
    outcome: list[Any] = []

    def ask() -> None:
        try:
            outcome.append(GcsClient(address=host_port).cluster_id)
        except BaseException as exc:  # noqa: BLE001 - every failure is reported by the waiter
            outcome.append(exc)

    thread = threading.Thread(target=ask, name="rlctl-gcs-check", daemon=True)
    thread.start()
    deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(0.2)  # short slices: Ctrl-C is seen here
    if not outcome:
        raise ClusterUnreachable(
            f"resources.address = {address!r}: {host_port} accepts connections but no Ray "
            f"cluster answered within {HANDSHAKE_TIMEOUT_S:.0f} s (another service on that "
            f"port?); {fix}")
    if isinstance(outcome[0], BaseException):
        exc = outcome[0]
        raise ClusterUnreachable(
            f"resources.address = {address!r}: the Ray cluster at {host_port} refused us: "
            f"{type(exc).__name__}: {exc}; {fix}") from None
