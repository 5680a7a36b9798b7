"""``ray``: tensors in Ray's object store, keys and tags in one index actor.

A put encodes the fields as numpy columns (zero-copy views of the caller's tensors),
``ray.put``s them once as a block (owned by the writing process, per Ray's ownership model:
it lives as long as the writer, so write from actors or the driver), and registers
``(block, row)`` per key and field with the actor. The registration overlaps the copy: the
keys are reserved before ``ray.put`` starts and the block's ``ObjectRef`` is committed after
it without waiting for the reply, so a put costs its copy, not its copy plus a round trip;
a read that arrives in between waits in the actor for the commit. A block of at most
``inline_max_bytes`` (a few samples' scalars, a tag-sized put) skips the object store: it
travels inside the index call and the index actor holds it. Index calls that threads of one
process make at the same time share one actor round trip (:mod:`rlctl.dataplane.index_batch`).
A get asks the actor where the rows are, ``ray.get``s the blocks (on the same node these are
zero-copy views of shared memory, never unpickled from a socket) and gathers the rows into
fresh tensors with one copy per field. With ``zero_copy_reads`` a read of rows that one put
wrote together returns views of shared memory instead (no copy at all): such tensors must be
treated as read-only, since Ray does not protect the pages and a write corrupts the store.

The handle is picklable: a copy sent to a Ray actor carries only the index actor's handle
and reconnects to the same store. Ray must be initialised by the caller.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import ray
from tensordict import TensorDict

from rlctl.dataplane import columns
from rlctl.dataplane.block_plane import BlockDataPlane
from rlctl.dataplane.contract import DataPlaneError, Layout, describe_keys
from rlctl.dataplane.options import RayOptions
from rlctl.dataplane.ray_index import (
    IndexActorClient,
    call,
    copied_tags,
    get_or_create,
    unwrap,
)


class RayDataPlane(IndexActorClient, BlockDataPlane):
    """Client of a run's index actor; cheap to pickle into workers."""

    backend = "ray"
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

    # ------------------------------------------------------------------ writes
    def _register(self, partition_id: str, keys: list[str], tags, block) -> None:
        self._check_open()
        box, names = None, []
        if block:
            arrays = columns.to_numpy(block)
            if _inline_bytes(arrays) <= self.options.inline_max_bytes:
                # Small: the block rides in the index call (Ray inlines small arguments) and
                # lives in the index actor, saving an object-store put and a read's fetch.
                # As plain tuples of numpy arrays (and lists of str): a Column would make the
                # actor import torch.
                box = [{n: (c.kind, c.data, c.offsets, c.dtype) for n, c in arrays.items()}]
            else:
                self._put_through_store(partition_id, keys, tags, arrays)
                return
            names = list(block)
        self._index_put(partition_id, keys, tags, box, names)

    def _put_through_store(self, partition_id: str, keys: list[str], tags, arrays) -> None:
        """Reserve the keys, copy the block into the object store meanwhile, commit its ref."""
        token = uuid.uuid4().hex
        reserve = ("reserve", (partition_id, keys, copied_tags(tags), token, list(arrays)))
        reserving = self._index.batch.remote([reserve], 0.0)
        box: list[Any] | None = None
        failure: str | None = "the writer was interrupted mid-put"
        try:
            # ``arrays`` are views of the caller's tensors: ray.put copies them into the
            # object store once. The writer owns the block (Ray's ownership model;
            # ``_owner`` is gone since Ray 2.56): it lives as long as this process does.
            # Writers are long-lived worker actors or the driver, never short Ray tasks.
            box, failure = [ray.put(arrays)], None
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            # The commit goes out only once the reservation is in, so it can never overtake
            # it; readers of a failed put get the failure instead of waiting for bytes.
            unwrap(call(reserving, self.options.call_timeout_s, "put", raw=True)[0])
            self._index.batch.remote([("commit", (token, box, failure))], 0.0)

    def kv_clear(self, keys: Sequence[str], partition_id: str) -> None:
        self._check_open()
        self._index_call("clear", partition_id, list(keys))

    # ------------------------------------------------------------------ reads
    def _read(
        self,
        partition_id: str,
        keys: list[str],
        fields: list[str],
        layout: Layout,
        pad_value: float,
    ) -> TensorDict:
        boxed, locs = self._index_call("locate", partition_id, keys, fields, what="get")
        # Each handle is an ObjectRef, or an inline block the index actor held (plain tuples).
        blocks = {}
        for bid, (handle,) in boxed.items():
            blocks[bid] = handle if isinstance(handle, ray.ObjectRef) else {
                n: columns.Column(*parts) for n, parts in handle.items()
            }
        ids = [bid for bid, h in blocks.items() if isinstance(h, ray.ObjectRef)]
        try:
            fetched = ray.get([blocks[b] for b in ids], timeout=self.options.call_timeout_s)
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
        blocks.update(zip(ids, fetched, strict=True))
        return columns.assemble(
            blocks,
            locs,
            len(keys),
            layout=layout,
            pad_value=pad_value,
            copy=not self.options.zero_copy_reads,
        )

    def block_count(self) -> int:
        """Blocks still referenced (tests check that clears release object-store memory)."""
        return self._index_call("block_count")

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """The creator's close ends the index actor (and frees every block); copies just detach."""
        if self._closed:
            return
        self._closed = True
        if self._creator:
            self._end_index()


def _inline_bytes(block: columns.Block) -> float:
    """Bytes of a block's tensor columns and of the strings of its object columns (a prompt
    batch's ground truths and sources); infinite with any other object, whose class the index
    actor might not be able to import (and whose size is unknown)."""
    total = 0
    for col in block.values():
        if col.kind == "object":
            if not all(isinstance(item, str) for item in col.data):
                return float("inf")
            total += sum(len(item.encode()) for item in col.data)
        else:
            total += col.data.nbytes + (0 if col.offsets is None else col.offsets.nbytes)
    return total
