"""``memory``: the in-process data plane (``--local`` mode and unit tests).

Thread-safe: one ``Condition`` guards the :class:`KeyIndex`; tensors are encoded before the
lock is taken and assembled after it is released (stored blocks are never mutated, so a
reader can copy out of them while a writer registers a new block). Readiness is pushed:
a put that changes the listing notifies ``kv_watch`` / ``kv_watch_changes`` waiters.

Single-process by design: pickling it (e.g. passing it to a Ray actor) raises, because the
other process would silently get an empty, unrelated store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from tensordict import TensorDict

from rlctl.dataplane import columns
from rlctl.dataplane.block_plane import BlockDataPlane
from rlctl.dataplane.contract import Layout, TagChanges
from rlctl.dataplane.key_index import KeyIndex
from rlctl.dataplane.options import MemoryOptions


class MemoryDataPlane(BlockDataPlane):
    """A dict of blocks in this process, behind a lock."""

    backend = "memory"
    multi_process = False

    def __init__(self, options: MemoryOptions | None = None, *, run_id: str = "local") -> None:
        self.options = options or MemoryOptions()
        self.run_id = run_id
        self._index = KeyIndex()
        self._cond = threading.Condition()
        self._closed = False

    def __reduce__(self):
        raise TypeError(
            "the 'memory' data plane lives in one process and cannot be pickled (e.g. sent "
            'to a Ray actor); use [data_plane] backend = "ray" for multi-process runs'
        )

    def _copy_on_put(self) -> bool:
        return self.options.copy_on_put

    # ------------------------------------------------------------------ writes
    def _register(self, partition_id: str, keys: list[str], tags, block) -> None:
        with self._cond:
            self._check_open()
            before = self._index.version(partition_id)
            if self._index.put(partition_id, keys, tags, block, list(block or ())) != before:
                self._cond.notify_all()

    def kv_clear(self, keys: Sequence[str], partition_id: str) -> None:
        with self._cond:
            self._check_open()
            self._index.clear(partition_id, list(keys))
            self._cond.notify_all()

    # ------------------------------------------------------------------ reads
    def _read(
        self,
        partition_id: str,
        keys: list[str],
        fields: list[str],
        layout: Layout,
        pad_value: float,
    ) -> TensorDict:
        with self._cond:
            self._check_open()  # again under the lock: a close may have raced the base's check
            located = self._index.locate(partition_id, keys, fields)
        return columns.assemble(
            located.handles, located.locs, len(keys), layout=layout, pad_value=pad_value
        )

    def kv_list(self, partition_id: str) -> dict[str, dict[str, Any]]:
        with self._cond:
            self._check_open()
            return self._index.list(partition_id)

    def kv_watch(self, partition_id: str, version: int, timeout: float) -> int:
        with self._cond:
            self._wait_past(partition_id, version, timeout)
            return self._index.version(partition_id)

    def kv_watch_changes(self, partition_id: str, since: int, timeout: float) -> TagChanges:
        with self._cond:  # the changes are of exactly the version returned
            if since <= self._index.version(partition_id):  # not a version of the future
                self._wait_past(partition_id, since, timeout)
            else:
                self._check_open()
            return self._index.changes(partition_id, since)

    def _wait_past(self, partition_id: str, version: int, timeout: float) -> None:
        """Under the lock: until the partition's version exceeds ``version`` or ``timeout``."""
        deadline = time.monotonic() + max(0.0, timeout)
        while not self._closed and self._index.version(partition_id) <= version:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._cond.wait(remaining)
        self._check_open()

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._index = KeyIndex()
            self._cond.notify_all()

