"""A Ray driver process on a node of the test cluster, whose functions a test calls.

It runs as ``python -m tests.ray_driver`` through the node's exec prefix (its network
namespace, host name and ``/etc/hosts``, like every process of the cluster), joins the
cluster, waits until every node is alive, then runs the module-level functions the test
sends it over a socket pair, one at a time, returning their results (pickled: only this
test's own child is unpickled). Every call is bounded; a driver that does not answer in time
is killed and the call fails, naming it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class DriverCallError(RuntimeError):
    """A function run in the driver raised; the message carries the driver's traceback."""


def _join_cluster(address: str, expected_nodes: int, timeout_s: float) -> None:
    import ray

    ray.init(address=address, log_to_driver=False)
    deadline = time.monotonic() + timeout_s
    while sum(n["Alive"] for n in ray.nodes()) < expected_nodes:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{expected_nodes} nodes were not alive after {timeout_s} s: "
                               f"{[(n['NodeManagerAddress'], n['Alive']) for n in ray.nodes()]}")
        time.sleep(0.2)


def main(argv: Sequence[str]) -> None:
    """``python -m tests.ray_driver FD ADDRESS EXPECTED_NODES TIMEOUT_S``."""
    conn = Connection(int(argv[0]))
    try:
        _join_cluster(argv[1], int(argv[2]), float(argv[3]))
        conn.send(("ok", None))
    except BaseException:  # noqa: BLE001 - reported to the test, then this process ends
        conn.send(("err", traceback.format_exc()))
        return
    while (request := conn.recv()) is not None:
        fn, args, kwargs = request
        try:
            conn.send(("ok", fn(*args, **kwargs)))
        except BaseException:  # noqa: BLE001 - reported to the test, the driver goes on
            conn.send(("err", traceback.format_exc()))
    import ray

    ray.shutdown()


class RayDriver:
    """The test's handle on the driver process: :meth:`call` runs a function there."""

    def __init__(self, exec_prefix: Sequence[str], env: Mapping[str, str], address: str, *,
                 expected_nodes: int, timeout_s: float) -> None:
        ours, theirs = socket.socketpair()
        env = dict(env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        try:
            self._proc = subprocess.Popen(
                [*exec_prefix, sys.executable, "-m", "tests.ray_driver", str(theirs.fileno()),
                 address, str(expected_nodes), str(timeout_s)],
                env=env, cwd=ROOT, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())
        self._receive("joining the cluster", timeout_s + 60)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def call(self, fn: Callable[..., Any], *args: Any, timeout_s: float = 300.0,
             **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in the driver (``fn`` importable: module level)."""
        self._conn.send((fn, args, kwargs))
        return self._receive(f"{fn.__qualname__}{args!r}", timeout_s)

    def _receive(self, what: str, timeout_s: float) -> Any:
        if not self._conn.poll(timeout_s):
            self._kill()
            raise TimeoutError(f"the test driver did not finish {what} in {timeout_s} s")
        try:
            kind, value = self._conn.recv()
        except EOFError:
            self._kill()
            raise DriverCallError(f"the test driver died during {what} "
                                  f"(exit code {self._proc.returncode})") from None
        if kind == "err":
            raise DriverCallError(f"{what} failed in the test driver:\n{value}")
        return value

    def _kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait(10)

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._conn.send(None)
                self._proc.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        self._conn.close()


if __name__ == "__main__":
    main(sys.argv[1:])
