"""Group commit: the calls a process's threads make at the same time travel as one batch.

A single-key put used to cost one index-actor round trip of its own, so 8 writer threads (or
a rollout worker's concurrent sessions, whose async twins run in threads) queued behind each
other at one round trip per put. Here the first caller with nothing in flight sends its call;
callers that arrive while it is in flight queue up, and when it returns the first of them
sends the whole queue as one batch (the index actor applies a batch in order, in one
event-loop turn).

Every caller still blocks until its own call was applied, so what a returned put wrote is
visible to every later reader in any process (the contract's read-after-write), and a lone
thread pays what it paid before: one round trip per call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rlctl.dataplane.contract import DataPlaneError

# send(items, what) -> one result per item, in order; raising fails every item of the batch.
Send = Callable[[list[Any], str], list[Any]]


class _Pending:
    __slots__ = ("done", "gate", "item", "result", "what", "woken")

    def __init__(self, item: Any, what: str) -> None:
        self.item, self.what = item, what
        self.done = False  # result (or failure) is in
        self.result: Any = None
        # Released once: when done, or to hand this caller the sending role. A bare lock
        # costs a third of a threading.Event per wait (no condition, no waiter list), which
        # counts at thousands of puts per second.
        self.gate = threading.Lock()
        self.gate.acquire()
        self.woken = False

    def wake(self) -> None:
        self.woken = True
        self.gate.release()

    def wait(self, timeout: float) -> bool:
        return self.gate.acquire(timeout=timeout)


class GroupCommit:
    """Coalesces concurrent :meth:`call` s into batches handed to ``send``, one batch at a time."""

    def __init__(self, send: Send, wait_s: float) -> None:
        self._send = send
        self._wait_s = wait_s  # how long a queued caller waits before it gives up
        self._lock = threading.Lock()
        self._queue: list[_Pending] = []
        self._sending = False

    def call(self, item: Any, what: str) -> Any:
        """Send ``item`` (alone or with whatever else is queued); returns its result."""
        mine = _Pending(item, what)
        with self._lock:
            self._queue.append(mine)
            send = not self._sending
            self._sending = True
        if not send:
            if not mine.wait(self._wait_s):
                self._abandon(mine)
            send = not mine.done  # woken without a result: our item heads the queue, send it
        if send:
            self._send_queue()
        if isinstance(mine.result, _Failure):
            raise mine.result.exc
        return mine.result

    def _send_queue(self) -> None:
        with self._lock:
            batch, self._queue = self._queue, []
        what = batch[0].what if len(batch) == 1 else f"{len(batch)} batched calls"
        try:
            results = self._send([p.item for p in batch], what)
            if len(results) != len(batch):
                raise DataPlaneError(f"a batch of {len(batch)} got {len(results)} replies")
        except BaseException as exc:  # noqa: BLE001 -- every caller of the batch must hear it
            results = [_Failure(exc)] * len(batch)
        for pending, result in zip(batch, results, strict=True):
            pending.result, pending.done = result, True
            pending.wake()
        with self._lock:
            if self._queue:
                self._queue[0].wake()  # hand the sending role to the next in line
            else:
                self._sending = False

    def _abandon(self, mine: _Pending) -> None:
        with self._lock:
            if mine.woken:
                return  # woken just now: a result, or the sending role
            if mine in self._queue:  # not sent yet: it never will be
                self._queue.remove(mine)
        raise DataPlaneError(
            f"the data-plane call {mine.what} waited over {self._wait_s:.0f} s for the calls "
            "queued ahead of it (is the Ray cluster overloaded?)"
        )


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
