"""``transferqueue``: an adapter that stores field bytes in TransferQueue 0.1.x.

What TransferQueue does not give, the adapter adds, with measured reasons:

* **Start-up on 2 CPUs.** TQ's controller and each storage unit reserve one Ray CPU and it
  starts two units by default: ``tq.init`` hangs silently on a 2-CPU machine. We start
  ``storage_units`` units (1) and lower the actors' CPU reservation to ``unit_num_cpus``
  (0) for the duration of ``tq.init``; the init runs under a timeout.
* **Atomic tags, push readiness, named errors.** TQ merges tags client-side
  (read-modify-write in ``BatchMeta.update_custom_meta``; every data put writes the whole
  read-back tag dict again), so concurrent writers lose updates; it has no wait; it drops
  unknown fields silently. Keys, tags and the kind of each field (dense / jagged / object)
  therefore live in rlctl's index actor (:mod:`rlctl.dataplane.ray_index`, the same one as
  the ``ray`` backend); TQ carries the field data only. A TQ result that lacks a requested
  field is an error.
* **Dense stays dense.** TQ returns every non-scalar tensor as a jagged nested tensor (its
  PR #92); dense fields are stacked back using the recorded kind.
* **Loopback.** TQ binds ZMQ to Ray's node address; unless ``loopback_only`` is off, the
  adapter refuses to start when that is not 127.0.0.1 (set
  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` before ``ray.init``).
* **Lifecycle.** ``tq.close()`` kills the controller from any process that calls it, so only
  the handle that started TQ closes it; pickled copies (in workers) only attach.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import ray
import torch
from tensordict import NonTensorStack, TensorDict

from rlctl.dataplane import columns, jagged, npbridge
from rlctl.dataplane.block_plane import BlockDataPlane
from rlctl.dataplane.contract import (
    DataPlaneError,
    FieldLayoutError,
    Layout,
    MissingFieldError,
    ShapeMismatchError,
)
from rlctl.dataplane.options import TransferQueueOptions
from rlctl.dataplane.ray_index import IndexActorClient, get_or_create

TQ_CONTROLLER_NAME = ("TransferQueueController", "transfer_queue")

# TQ's sync client is driven from worker threads so that every call has a timeout.
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="rlctl-tq")


def _with_timeout(fn, timeout: float, what: str, *args, **kwargs):
    future = _POOL.submit(fn, *args, **kwargs)
    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise DataPlaneError(
            f"transferqueue {what} did not finish within {timeout:.0f} s (is TQ running? "
            "raise [data_plane.options] call_timeout_s for very large batches)"
        ) from None


def _tq_running() -> bool:
    try:
        ray.get_actor(TQ_CONTROLLER_NAME[0], namespace=TQ_CONTROLLER_NAME[1])
        return True
    except ValueError:
        return False


def _loopback_required(options: TransferQueueOptions) -> bool:
    """``loopback_only``, or when unset: unless the run joined a cluster at an address (set by
    rlctl.run.runtime for every process of the run; a joined cluster's node address is the
    one its operator gave)."""
    if options.loopback_only is not None:
        return options.loopback_only
    return os.environ.get("RLCTL_RAY_CLUSTER") != "joined"


def _start_tq(options: TransferQueueOptions) -> bool:
    """Start TransferQueue (or attach to a running one). Returns True if we started it."""
    import transfer_queue as tq
    from omegaconf import OmegaConf
    from transfer_queue.controller import TransferQueueController
    from transfer_queue.storage.simple_storage import SimpleStorageUnit

    if _tq_running():
        _with_timeout(tq.init, options.init_timeout_s, "attach (tq.init)")
        return False
    node_ip = ray.util.get_node_ip_address().strip("[]")
    if _loopback_required(options) and not (node_ip.startswith("127.") or node_ip == "::1"):
        raise DataPlaneError(
            f"transferqueue would bind its ZMQ sockets to {node_ip} (Ray's node address), not "
            "loopback: set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before ray.init, or set "
            "[data_plane.options] loopback_only = false on a multi-node cluster"
        )
    conf = OmegaConf.create(
        {"backend": {"SimpleStorage": {"num_data_storage_units": options.storage_units}}}
    )
    # TQ's actors hard-code @ray.remote(num_cpus=1); their reservation is a class default
    # we lower while init creates them (no public option exists in 0.1.11).
    saved = [
        (cls, dict(cls._default_options)) for cls in (TransferQueueController, SimpleStorageUnit)
    ]
    try:
        for cls, _ in saved:
            cls._default_options["num_cpus"] = options.unit_num_cpus
        _with_timeout(tq.init, options.init_timeout_s, "start-up (tq.init)", conf)
    finally:
        for cls, defaults in saved:
            cls._default_options.clear()
            cls._default_options.update(defaults)
    return True


class TransferQueueDataPlane(IndexActorClient, BlockDataPlane):
    """TQ for bytes, rlctl's index actor for keys, tags, kinds and readiness."""

    backend = "transferqueue"
    multi_process = True

    def __init__(
        self, options: TransferQueueOptions | None = None, *, run_id: str, _index: Any = None
    ) -> None:
        self.options = options or TransferQueueOptions()
        self.run_id = run_id
        os.environ.setdefault("TQ_LOGGING_LEVEL", self.options.logging_level)
        if not ray.is_initialized():
            raise DataPlaneError(
                "the 'transferqueue' data plane needs a running Ray: call ray.init() first"
            )
        import transfer_queue as tq

        self._tq = tq
        if _index is None:
            self._started_tq = _start_tq(self.options)
            self._index = get_or_create(f"rlctl-tq-index-{run_id}", "rlctl")
            self._creator = True
            self._attached = True
        else:
            # A pickled copy in another process. Attaching calls into Ray, which must not
            # happen while Ray is still deserialising a task's arguments: attach on first use.
            self._started_tq = False
            self._index = _index
            self._creator = False
            self._attached = False
        self._closed = False

    def _tq_call(self, fn, what: str, *args, **kwargs):
        """Call TQ's sync client ``fn`` under the call timeout."""
        return _with_timeout(fn, self.options.call_timeout_s, what, *args, **kwargs)

    # ------------------------------------------------------------------ writes
    def _register(self, partition_id: str, keys: list[str], tags, block) -> None:
        self._check_open()
        box, names = None, []
        if block:
            td = TensorDict({n: _to_tq_value(c) for n, c in block.items()}, batch_size=[len(keys)])
            # Data first, then the index: a reader that sees the field can read it.
            self._tq_call(
                self._tq.kv_batch_put, "put", keys=keys, partition_id=partition_id, fields=td
            )
            box, names = [{n: c.kind for n, c in block.items()}], list(block)
        self._index_put(partition_id, keys, tags, box, names)

    def kv_clear(self, keys: Sequence[str], partition_id: str) -> None:
        self._check_open()
        keys = list(keys)
        self._index_call("clear", partition_id, keys)
        if keys:
            self._tq_call(self._tq.kv_clear, "clear", keys, partition_id)

    # ------------------------------------------------------------------ reads
    def _read(
        self,
        partition_id: str,
        keys: list[str],
        fields: list[str],
        layout: Layout,
        pad_value: float,
    ) -> TensorDict:
        if layout not in ("jagged", "padded"):
            raise ValueError(f"layout must be 'jagged' or 'padded', got {layout!r}")
        boxed, locs = self._index_call("locate", partition_id, keys, fields, what="get")
        if not keys or not fields:
            return TensorDict({}, batch_size=[len(keys)])
        got = self._tq_call(
            self._tq.kv_batch_get, "get", keys=keys, partition_id=partition_id, select_fields=fields
        )
        out: dict[str, Any] = {}
        for name in fields:
            if name not in got.keys():  # noqa: SIM118 (a TensorDict iterates its batch)
                raise MissingFieldError(
                    f"transferqueue returned no field {name!r} for keys in partition "
                    f"{partition_id!r} although rlctl's index records it (TQ drops unknown "
                    "fields silently; was the key cleared concurrently?)",
                    field=name,
                    keys=keys,
                )
            kinds = {boxed[bid][0][name] for bid, _ in locs[name]}
            out[name] = _from_tq_value(name, got.get(name), kinds, layout, pad_value)
        return TensorDict(out, batch_size=[len(keys)])

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """The creator shuts TQ down (``tq.close``) and ends the index; copies just detach."""
        if self._closed:
            return
        self._closed = True
        if not self._creator:
            return
        self._end_index()
        if self._started_tq:
            self._tq_call(self._tq.close, "shutdown (tq.close)")

    def _check_open(self) -> None:
        super()._check_open()
        if not self._attached:
            if not _tq_running():
                raise DataPlaneError(
                    "transferqueue is not running any more (its creator closed it)"
                )
            _with_timeout(self._tq.init, self.options.init_timeout_s, "attach (tq.init)")
            self._attached = True


def _to_tq_value(col: columns.Column) -> Any:
    if col.kind == "dense":
        return col.data
    if col.kind == "jagged":
        return torch.nested.nested_tensor_from_jagged(col.data, col.offsets)
    return NonTensorStack.from_list(col.data)


def _from_tq_value(name: str, value: Any, kinds: set[str], layout: Layout, pad_value: float) -> Any:
    if "object" in kinds:
        if kinds != {"object"}:
            raise FieldLayoutError(
                f"field {name!r} holds objects for some keys and tensors for others"
            )
        return value if isinstance(value, NonTensorStack) else NonTensorStack.from_list(list(value))
    if kinds == {"dense"}:
        if not value.is_nested:  # per-sample scalars come back dense
            return value
        rows = value.unbind()
        shapes = {tuple(r.shape) for r in rows}
        if len(shapes) != 1:
            raise ShapeMismatchError(
                f"field {name!r} was put dense with different per-sample shapes {sorted(shapes)}; "
                "put variable-length fields as a jagged nested tensor or a list of tensors"
            )
        return npbridge.to_torch(np.stack([npbridge.np_view(r) for r in rows]), rows[0].dtype)
    nt = value if value.is_nested else jagged.from_list(list(value.unbind(0)))
    if nt.layout != torch.jagged:
        nt = jagged.from_list(list(nt.unbind()))
    if layout == "padded":
        return jagged.to_padded(nt, pad_value)[0]
    return nt
