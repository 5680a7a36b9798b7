"""Data-plane clears of a finished step's keys, off the step's critical path.

Once a step's samples are trained (and its prompts generated) nothing reads their keys
again, yet a clear is an index round trip (a few milliseconds on a small box, twice a step)
that the next phase would wait for. The trainer hands them here instead: one thread sends
them in order while the next step generates.

Nothing is left unbounded or unheard: a clear handed in during step t is waited for (at most
``timeout_s``) when step t + 2 begins -- it had all of step t + 1 to finish -- and every clear
by :meth:`close`; one that failed or timed out raises there, naming what it cleared.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence
from typing import Any


class ClearError(RuntimeError):
    """A background clear failed or did not finish in time."""


class BackgroundClears:
    """``kv_clear`` calls on one thread of their own, waited for a step later."""

    def __init__(self, plane: Any, timeout_s: float) -> None:
        self.plane = plane
        self.timeout_s = timeout_s
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._earlier: list[tuple[str, concurrent.futures.Future]] = []  # handed in last step
        self._current: list[tuple[str, concurrent.futures.Future]] = []

    def clear(self, keys: Sequence[str], partition_id: str) -> None:
        """Clear ``keys`` of ``partition_id`` soon (after the clears handed in before)."""
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="rlctl-clear")
        what = f"clearing {len(keys)} key(s) of partition {partition_id!r}"
        self._current.append((what, self._pool.submit(self.plane.kv_clear, list(keys),
                                                      partition_id)))

    def next_step(self) -> None:
        """A step begins: wait for the clears handed in before the previous one began."""
        earlier, self._earlier, self._current = self._earlier, self._current, []
        self._wait(earlier)

    def close(self) -> None:
        """Wait for every clear handed in, then stop the thread."""
        pending, self._earlier, self._current = self._earlier + self._current, [], []
        try:
            self._wait(pending)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None

    def _wait(self, pending: list[tuple[str, concurrent.futures.Future]]) -> None:
        for what, future in pending:
            try:
                future.result(timeout=self.timeout_s)
            except concurrent.futures.TimeoutError:
                raise ClearError(f"{what} did not finish within {self.timeout_s:g} s "
                                 "(is the data plane overloaded or stopped?)") from None
            except Exception as exc:
                raise ClearError(f"{what} failed: {exc}") from exc
