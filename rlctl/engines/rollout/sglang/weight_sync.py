"""The ``sglang`` weight sync: actor weights into SGLang servers over one of three transports.

``tensor`` (default)
    ``POST /update_weights_from_tensor`` per bucket. Each bucket is pickled with torch's
    ``ForkingPickler`` (what SGLang's ``MultiprocessingSerializer`` does) under the
    ``file_system`` sharing strategy: the tensors move to named shared-memory files and only
    their names travel in the JSON body; the server maps the same memory (no copy through
    HTTP). The default ``file_descriptor`` strategy crashes SGLang's scheduler (measured).
    SGLang unpickles this payload (with its own restricted unpickler); we accept that only
    because the payload is made here and sent to a server this process trusts (one we
    started or one the user named), never bytes that came from elsewhere. Same machine only.
``distributed``
    A process group of this process (rank 0) and every server's TP ranks, made once
    (``POST /init_weights_update_group``; gloo on CPU, nccl on GPU), then per bucket
    ``POST /update_weights_from_distributed`` (names, dtypes, shapes) while this process
    broadcasts each tensor. The group is a *new* group built with ``torch.distributed``'s own
    helpers the way SGLang builds its side (TCPStore rendezvous, prefix store), never the
    default group, so it coexists with the trainer's FSDP group; every wait has a timeout.
``disk``
    One safetensors file in a staging directory, then ``POST /update_weights_from_disk``.

``tensor`` and ``distributed`` run inside ``/begin_weight_update`` ... ``/end_weight_update``
(SGLang 0.5.23 refuses them otherwise). Every update passes ``weight_version`` and
``flush_cache`` (radix-cache KV computed by the old weights must not be reused), and afterwards
each server must report the new version in ``GET /model_info``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import os
import time
import uuid
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlctl.engines.rollout.server.client import Replica, get_json
from rlctl.engines.rollout.server.process import ServerError, free_port
from rlctl.plugins.weight_syncs import SGLangWeightSyncOptions

if TYPE_CHECKING:
    import torch

    from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine

Bucket = list[tuple[str, "torch.Tensor"]]


class SGLangWeightSync:
    """The registered ``sglang`` weight sync: ``sync(weights, engine, version)``."""

    def __init__(self, options: SGLangWeightSyncOptions | None = None) -> None:
        self.options = options or SGLangWeightSyncOptions()

    def __call__(self, weights: Mapping[str, torch.Tensor], rollout: Any, version: int) -> None:
        if not weights:
            raise ValueError("sglang weight sync got an empty state dict: export from training rank 0")
        rollout.update_weights_with(self.options, weights, version)


def make_buckets(state_dict: Mapping[str, torch.Tensor], bucket_bytes: int) -> list[Bucket]:
    """Split ``state_dict`` into lists of about ``bucket_bytes`` (a bigger tensor gets its own).

    Tensors are copied to fresh contiguous CPU tensors: the ``tensor`` transport moves their
    storage into shared memory, which must not happen to the actor's own parameters.
    """
    buckets: list[Bucket] = [[]]
    size = 0
    for name, tensor in state_dict.items():
        t = tensor.detach().to("cpu", copy=True).contiguous()
        nbytes = t.numel() * t.element_size()
        if buckets[-1] and size + nbytes > bucket_bytes:
            buckets.append([])
            size = 0
        buckets[-1].append((name, t))
        size += nbytes
    return buckets


def serialize_bucket(bucket: Bucket) -> str:
    """``MultiprocessingSerializer.serialize(bucket, output_str=True)`` without importing SGLang."""
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing as torch_mp  # importing it registers torch's tensor reductions

    previous = torch_mp.get_sharing_strategy()
    torch_mp.set_sharing_strategy("file_system")  # read when pickling; restored right after
    try:
        buf = io.BytesIO()
        ForkingPickler(buf).dump(bucket)
    finally:
        torch_mp.set_sharing_strategy(previous)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")  # SGLang does getattr(torch, name)


class SGLangWeightUpdater:
    """Runs updates for one engine and owns the ``distributed`` group across updates."""

    def __init__(self, engine: SGLangRolloutEngine) -> None:
        self.engine = engine
        self._group: Any = None  # torch ProcessGroup of the ``distributed`` transport
        self._group_name: str | None = None

    # ------------------------------------------------------------------ entry point
    def update(self, sync: SGLangWeightSyncOptions, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        started = time.monotonic()
        transport = {"tensor": self._tensor, "distributed": self._distributed, "disk": self._disk}[sync.transport]
        try:
            transport(sync, state_dict, version)
            self._check_versions(version)
        except ServerError as exc:
            raise ServerError(f"weight update to version {version} ({sync.transport} transport) failed: {exc}") from exc
        self.engine._initial_labels.clear()  # every server now answers str(version)
        self.engine.last_update_s = time.monotonic() - started

    def _check_versions(self, version: int) -> None:
        for replica in self.engine.replicas:
            reported = str(get_json(replica.url + "/model_info").get("weight_version"))
            if reported != str(version):
                raise ServerError(
                    f"server {replica.name} reports weight version {reported!r} after the update "
                    f"to {version}: the update did not take effect{replica.log_suffix()}"
                )

    # ------------------------------------------------------------------ HTTP helpers
    def _all(self, path: str, body: dict[str, Any] | None, timeout_s: float) -> Any:
        """An awaitable that POSTs ``body`` to every replica and checks ``success``."""

        async def one(replica: Replica) -> None:
            answer = await self.engine._post(replica, path, body, timeout_s=timeout_s)
            if isinstance(answer, dict) and answer.get("success") is False:
                raise ServerError(f"server {replica.name} refused POST {path}: {answer.get('message')}")

        async def every() -> None:
            await asyncio.gather(*(one(r) for r in self.engine.replicas))

        return every()

    def _run(self, coro: Any) -> Any:
        return self.engine.require_http().run(coro)

    def _in_session(self, sync: SGLangWeightSyncOptions, send: Any) -> None:
        """``send()`` between ``/begin_weight_update`` and ``/end_weight_update`` on every replica."""
        self._run(self._all("/begin_weight_update", {"selector": "all"}, sync.timeout_s))
        try:
            send()
        except BaseException:
            # Close the session, but report the failure that matters, not this one.
            with contextlib.suppress(ServerError):
                self._run(self._all("/end_weight_update", {}, sync.timeout_s))
            raise
        self._run(self._all("/end_weight_update", {}, sync.timeout_s))

    @staticmethod
    def _update_body(sync: SGLangWeightSyncOptions, version: int, last: bool) -> dict[str, Any]:
        # The version (and the cache flush) go with the last bucket, once the weights are whole.
        return {
            "flush_cache": sync.flush_cache and last,
            "weight_version": str(version) if last else None,
            "abort_all_requests": False,
        }

    # ------------------------------------------------------------------ transports
    def _tensor(self, sync: SGLangWeightSyncOptions, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        buckets = make_buckets(state_dict, sync.bucket_mb << 20)
        tp = self.engine.options.tensor_parallel_size

        def send() -> None:
            for i, bucket in enumerate(buckets):
                payload = serialize_bucket(bucket)  # `bucket` keeps the shared memory alive
                body = {"serialized_named_tensors": [payload] * tp,  # one entry per TP rank
                        **self._update_body(sync, version, i == len(buckets) - 1)}
                self._run(self._all("/update_weights_from_tensor", body, sync.timeout_s))

        self._in_session(sync, send)

    def _disk(self, sync: SGLangWeightSyncOptions, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        from safetensors.torch import save_file

        staging = Path(sync.staging_dir) if sync.staging_dir else self.engine.workdir / "weights"
        staging.mkdir(parents=True, exist_ok=True)
        # One bucket of copies: tied weights that share storage would be refused by safetensors.
        tensors = dict(make_buckets(state_dict, 1 << 62)[0])
        tmp = staging / ".model.safetensors.tmp"
        save_file(tensors, str(tmp))
        os.replace(tmp, staging / "model.safetensors")  # the server loads every *.safetensors there
        body = {"model_path": str(staging), **self._update_body(sync, version, True)}
        self._run(self._all("/update_weights_from_disk", body, sync.timeout_s))

    def _distributed(self, sync: SGLangWeightSyncOptions, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        if self._group is None:
            self._join_group(sync)
        buckets = make_buckets(state_dict, sync.bucket_mb << 20)
        device = self.engine.spec.device if self._backend(sync) == "nccl" else "cpu"

        def send() -> None:
            for i, bucket in enumerate(buckets):
                body = {
                    "names": [n for n, _ in bucket],
                    "dtypes": [dtype_name(t) for _, t in bucket],
                    "shapes": [list(t.shape) for _, t in bucket],
                    "group_name": self._group_name,
                    **self._update_body(sync, version, i == len(buckets) - 1),
                }
                self._broadcast_while(sync, body, [t.to(device) for _, t in bucket])

        try:
            self._in_session(sync, send)
        except BaseException:
            self._drop_group()  # a broadcast may have been cut halfway: rejoin next time
            raise

    # ------------------------------------------------------------------ the distributed group
    def _backend(self, sync: SGLangWeightSyncOptions) -> str:
        if sync.group_backend != "auto":
            return sync.group_backend
        return "nccl" if self.engine.spec.device.startswith("cuda") else "gloo"

    def _join_group(self, sync: SGLangWeightSyncOptions) -> None:
        """Make the group: the servers join from their side while this process joins as rank 0."""
        replicas = self.engine.replicas
        tp = self.engine.options.tensor_parallel_size
        world_size = 1 + tp * len(replicas)
        port, name = free_port(), f"rlctl-sglang-{uuid.uuid4().hex[:12]}"
        http = self.engine.require_http()

        async def join(replica: Replica, offset: int) -> None:
            body = {"master_address": sync.master_address, "master_port": port, "rank_offset": offset,
                    "world_size": world_size, "group_name": name, "backend": self._backend(sync)}
            answer = await self.engine._post(replica, "/init_weights_update_group", body, timeout_s=sync.timeout_s)
            if isinstance(answer, dict) and answer.get("success") is False:
                raise ServerError(f"server {replica.name} could not join the weight-update group: {answer.get('message')}")

        # The servers' calls block until every rank has joined: they run on the HTTP loop while
        # this thread joins as rank 0.
        joins = [asyncio.run_coroutine_threadsafe(join(r, 1 + i * tp), http.loop) for i, r in enumerate(replicas)]
        try:
            group = new_group_as_rank0(sync.master_address, port, world_size, name, self._backend(sync), sync.timeout_s)
        except Exception as exc:
            for j in joins:
                j.cancel()
            errors = [str(j.exception()) for j in joins if j.done() and not j.cancelled() and j.exception()]
            raise ServerError(
                f"this process could not make the weight-update group {name} with "
                f"{', '.join(r.name for r in replicas)} within {sync.timeout_s:.0f} s: "
                f"{type(exc).__name__}: {exc}" + (f"; servers said: {errors}" if errors else "")
            ) from exc
        for j in joins:
            j.result(timeout=sync.timeout_s)
        self._group, self._group_name = group, name

    def _broadcast_while(self, sync: SGLangWeightSyncOptions, body: dict[str, Any], tensors: list[torch.Tensor]) -> None:
        """Broadcast ``tensors`` (rank 0) while the servers' ``update_weights_from_distributed``
        request is in flight; a server that refuses the request fails this at once, not at the
        group's timeout."""
        import torch.distributed as dist

        request = asyncio.run_coroutine_threadsafe(
            self._all("/update_weights_from_distributed", body, sync.timeout_s), self.engine.require_http().loop
        )
        works = [dist.broadcast(t, src=0, group=self._group, async_op=True) for t in tensors]
        deadline = time.monotonic() + sync.timeout_s
        while not all(w.is_completed() for w in works):
            if request.done() and request.exception() is not None:
                raise request.exception()  # type: ignore[misc]
            if time.monotonic() > deadline:
                request.cancel()
                raise ServerError(
                    f"broadcasting {len(tensors)} tensors to the servers took more than {sync.timeout_s:.0f} s"
                )
            time.sleep(0.005)
        for w in works:
            w.wait()  # raises if the transfer failed
        request.result(timeout=max(1.0, deadline - time.monotonic()))

    def _drop_group(self) -> None:
        group, self._group = self._group, None
        if group is not None:
            import torch.distributed as dist

            with contextlib.suppress(Exception):
                dist.destroy_process_group(group)

    def close(self) -> None:
        """Leave the group on both sides (servers that are gone are skipped)."""
        if self._group is None:
            return
        with contextlib.suppress(Exception):
            live = [r for r in self.engine.replicas if r.process is None or r.process.alive()]
            if live and self.engine._http is not None:
                self._run(self._all("/destroy_weights_update_group", {"group_name": self._group_name}, 30.0))
        self._drop_group()


def new_group_as_rank0(address: str, port: int, world_size: int, name: str, backend: str, timeout_s: float) -> Any:
    """A process group in which this process is rank 0, built exactly as SGLang builds its side
    (``sglang.srt.utils.common.init_custom_process_group``): TCP rendezvous, a store prefixed
    with the group name, torch's own group constructor. It is not the default group. The
    store listens on ``address`` only (``master_address``, 127.0.0.1 by default)."""
    from torch.distributed.distributed_c10d import (
        Backend,
        PrefixStore,
        _new_process_group_helper,
        _world,
    )

    from rlctl.engines.rendezvous import keep_collectives_local, tcp_store

    timeout = timedelta(seconds=timeout_s)
    keep_collectives_local(address)
    # The store ``rendezvous("tcp://...")`` would make, but listening on ``address`` only.
    store = tcp_store(address, port, world_size, is_master=True, timeout=timeout)
    rank, world = 0, world_size
    store.set_timeout(timeout)
    store = PrefixStore(name, store)
    group, _ = _new_process_group_helper(
        world, rank, [], Backend(backend), store, group_name=name, backend_options=None, timeout=timeout
    )
    _world.pg_group_ranks[group] = {i: i for i in range(world)}  # lets dist.broadcast take it
    return group
