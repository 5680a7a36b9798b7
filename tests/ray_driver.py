"""A Ray driver in its own process inside a node's network namespace, called from a test.

The process is started with ``spawn`` (a fresh interpreter, no threads yet), moves its main
thread into the namespace before it imports Ray, joins the cluster and then runs the
module-level functions the test sends it, one at a time, returning their results. Every call
is bounded; a driver that does not answer in time is killed and the call fails, naming it.
Only this test's own child process is unpickled here.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from tests.netns import Namespace


class DriverCallError(RuntimeError):
    """A function run in the driver raised; the message carries the driver's traceback."""


def _join_cluster(namespace: Namespace, env: Mapping[str, str], address: str,
                  expected_nodes: int, timeout_s: float) -> None:
    namespace.enter_current_thread()  # before any socket or thread exists in this process
    os.environ.clear()
    os.environ.update(env)
    import ray

    ray.init(address=address, log_to_driver=False)
    deadline = time.monotonic() + timeout_s
    while sum(n["Alive"] for n in ray.nodes()) < expected_nodes:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{expected_nodes} nodes were not alive after {timeout_s} s: "
                               f"{[(n['NodeManagerAddress'], n['Alive']) for n in ray.nodes()]}")
        time.sleep(0.2)


def _serve(conn: Any, namespace: Namespace, env: Mapping[str, str], address: str,
           expected_nodes: int, timeout_s: float) -> None:
    try:
        _join_cluster(namespace, env, address, expected_nodes, timeout_s)
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

    def __init__(self, namespace: Namespace, env: Mapping[str, str], address: str, *,
                 expected_nodes: int, timeout_s: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_serve, args=(child, namespace, dict(env), address, expected_nodes,
                                 timeout_s), name="ray-test-driver", daemon=True)
        self._proc.start()
        child.close()
        self._receive("joining the cluster", timeout_s + 60)

    @property
    def pid(self) -> int | None:
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
                                  f"(exit code {self._proc.exitcode})") from None
        if kind == "err":
            raise DriverCallError(f"{what} failed in the test driver:\n{value}")
        return value

    def _kill(self) -> None:
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(10)

    def close(self) -> None:
        if self._proc.is_alive():
            try:
                self._conn.send(None)
            except OSError:
                pass
            self._proc.join(30)
        self._kill()
        self._conn.close()
