"""``ray``: tensors in Ray's object store, keys and tags in one index actor.

A put encodes the fields as numpy columns (zero-copy views of the caller's tensors),
``ray.put``s them once as a block (owned by the writing process, per Ray's ownership model:
it lives as long as the writer, so write from actors or the driver), and registers
``(block, row)`` per key and field with the actor. A get asks the actor where the rows are,
``ray.get``s the blocks (on the same node these are
zero-copy views of shared memory, never unpickled from a socket) and gathers the rows into
fresh tensors with one copy per field. With ``zero_copy_reads`` a read of rows that one put
wrote together returns views of shared memory instead (no copy at all): such tensors must be
treated as read-only, since Ray does not protect the pages and a write corrupts the store.

The handle is picklable: a copy sent to a Ray actor carries only the index actor's handle
and reconnects to the same store. Ray must be initialised by the caller.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import ray
from tensordict import TensorDict

from rlctl.dataplane import columns
from rlctl.dataplane.contract import (
    AsyncTwinsMixin,
    DataPlaneClosedError,
    DataPlaneError,
    Layout,
    check_put_args,
    describe_keys,
)
from rlctl.dataplane.options import RayOptions
from rlctl.dataplane.ray_index import call, get_or_create


class RayDataPlane(AsyncTwinsMixin):
    """Client of a run's index actor; cheap to pickle into workers."""

    multi_process = True

    def __init__(
        self, options: RayOptions | None = None, *, run_id: str, _index: Any = None
    ) -> None:
        self.options = options or RayOptions()
        self.run_id = run_id
        self._creator = _index is None
        if _index is None:
            if not ray.is_initialized():
                raise DataPlaneError(
                    "the 'ray' data plane needs a running Ray: call ray.init() first "
                    "(the trainer does), or use backend 'memory' for single-process runs"
                )
            name = self.options.index_name or f"rlctl-dataplane-{run_id}"
            _index = get_or_create(name, self.options.namespace)
        self._index = _index
        self._closed = False

    def __reduce__(self):
        if self._closed:
            raise DataPlaneClosedError("cannot pickle a closed ray data plane")
        # Connection info only (the actor handle); never the data.
        return (_reconnect, (self.options, self.run_id, self._index))

    # ------------------------------------------------------------------ writes
    def kv_put(
        self,
        key: str,
        partition_id: str,
        fields: Mapping[str, Any] | TensorDict | None = None,
        tag: dict[str, Any] | None = None,
    ) -> None:
        keys = check_put_args([key], None if tag is None else [tag], fields)
        block = None if fields is None else columns.encode_single(fields, copy=False)
        self._register(partition_id, keys, None if tag is None else [tag], block)

    def kv_batch_put(
        self,
        keys: Sequence[str],
        partition_id: str,
        fields: Mapping[str, Any] | TensorDict | None = None,
        tags: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        keys = check_put_args(keys, tags, fields)
        # No copy here: ray.put copies the numpy views into the object store once.
        block = None if fields is None else columns.encode(fields, len(keys), copy=False)
        self._register(partition_id, keys, tags, block)

    def _register(self, partition_id: str, keys: list[str], tags, block) -> None:
        self._check_open()
        box, names = None, []
        if block:
            # The writer owns the block (Ray's ownership model; ``_owner`` is gone since
            # Ray 2.56): it lives as long as this process does. Writers are long-lived
            # worker actors or the driver, never short Ray tasks.
            box = [ray.put(columns.to_numpy(block))]
            names = list(block)
        tags = None if tags is None else [dict(t) for t in tags]
        call(
            self._index.put.remote(partition_id, keys, tags, box, names),
            self.options.call_timeout_s,
            "put",
        )

    def kv_clear(self, keys: Sequence[str], partition_id: str) -> None:
        self._check_open()
        call(
            self._index.clear.remote(partition_id, list(keys)), self.options.call_timeout_s, "clear"
        )

    # ------------------------------------------------------------------ reads
    def kv_batch_get(
        self,
        keys: Sequence[str],
        partition_id: str,
        fields: Sequence[str],
        *,
        layout: Layout = "jagged",
        pad_value: float = 0,
    ) -> TensorDict:
        self._check_open()
        keys = list(keys)
        boxed, locs = call(
            self._index.locate.remote(partition_id, keys, list(fields)),
            self.options.call_timeout_s,
            "get",
        )
        ids = list(boxed)
        try:
            fetched = ray.get([boxed[b][0] for b in ids], timeout=self.options.call_timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise DataPlaneError(
                f"reading {len(ids)} block(s) from the Ray object store took over "
                f"{self.options.call_timeout_s:.0f} s"
            ) from None
        except (ray.exceptions.OwnerDiedError, ray.exceptions.ObjectLostError) as exc:
            raise DataPlaneError(
                f"some of keys {describe_keys(keys)} in partition {partition_id!r} were written "
                "by a process that has exited, and Ray dropped its objects with it; write "
                f"from long-lived actors or the driver ({type(exc).__name__})"
            ) from None
        blocks = dict(zip(ids, fetched, strict=True))
        return columns.assemble(
            blocks,
            locs,
            len(keys),
            layout=layout,
            pad_value=pad_value,
            copy=not self.options.zero_copy_reads,
        )

    def kv_list(self, partition_id: str) -> dict[str, dict[str, Any]]:
        self._check_open()
        return call(self._index.list.remote(partition_id), self.options.call_timeout_s, "list")

    def kv_watch(self, partition_id: str, version: int, timeout: float) -> int:
        self._check_open()
        return call(
            self._index.watch.remote(partition_id, version, timeout),
            timeout + self.options.call_timeout_s,
            "watch",
        )

    def block_count(self) -> int:
        """Blocks still referenced (tests check that clears release object-store memory)."""
        return call(self._index.block_count.remote(), self.options.call_timeout_s, "block_count")

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """The creator's close ends the index actor (and frees every block); copies just detach."""
        if self._closed:
            return
        self._closed = True
        if self._creator:
            # The actor may already be gone with its cluster (ray.shutdown before close).
            with contextlib.suppress(ValueError, ray.exceptions.RayError):
                ray.kill(self._index)

    def _check_open(self) -> None:
        if self._closed:
            raise DataPlaneClosedError("this ray data plane was closed; open a new one")


def _reconnect(options: RayOptions, run_id: str, index: Any) -> RayDataPlane:
    return RayDataPlane(options, run_id=run_id, _index=index)
