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

LoRA adapters (``[engines.rollout] lora_sync = "adapter"``: ``weights`` is an
:class:`~rlctl.models.lora.AdapterWeights`): the adapter is written in PEFT's format to
``adapter-v<version>/`` in the staging directory (a shared filesystem), loaded on every server
with ``POST /load_lora_adapter`` under the name ``rlctl-lora-v<version>``, the engine's requests
name it from then on (``lora_path``), and the previous version is unloaded. The base weights,
and so the servers' ``weight_version``, do not change: the adapter's name carries the version.
SGLang 0.5's LoRA layers pin host memory, which needs CUDA: its CPU build cannot load adapters
(the recipe check refuses ``lora_sync = "adapter"`` there; ``merged`` works; rlctl's tests run
this path on CPU under a test-only shim that stops the pinning, docs/sglang.md).

Options: ``[engines.rollout.weight_sync_options]``
(:class:`~rlctl.engines.rollout.sglang.options.SGLangWeightSyncOptions`). The sync owns its
state (the ``distributed`` group) and uses only the engine's public surface (``replicas``,
``post`` / ``get``, ``on_replicas``, ``run`` / ``schedule``, ``check_names``,
``stamp_version``); :meth:`SGLangWeightSync.close` leaves the group while the servers run.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import io
import os
import shutil
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlctl.engines.rollout.buckets import buckets, cpu_tensors, with_last
from rlctl.engines.rollout.contract import WeightSync
from rlctl.engines.rollout.server.client import Replica
from rlctl.engines.rollout.server.process import ServerError
from rlctl.engines.rollout.sglang.options import SGLangWeightSyncOptions
from rlctl.models.lora import AdapterWeights
from rlctl.ports import free_port

if TYPE_CHECKING:
    import torch

    from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine

ADAPTER_PREFIX = "rlctl-lora-v"
"""The served name of the adapter of version N is ``rlctl-lora-vN``."""
Bucket = list[tuple[str, "torch.Tensor"]]
ReplicaCall = Callable[[Replica], Coroutine[Any, Any, None]]


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


class SGLangWeightSync(WeightSync):
    """The registered ``sglang`` weight sync: ``sync(weights, engine, version)``."""

    def __init__(self, options: SGLangWeightSyncOptions | None = None) -> None:
        self.options = options or SGLangWeightSyncOptions()
        self._group: Any = None  # torch ProcessGroup of the ``distributed`` transport
        self._group_name: str | None = None
        self._group_engine: SGLangRolloutEngine | None = None  # whose servers are in the group
        self.last_update_s = 0.0
        """Seconds the last sync took (first request to version check)."""

    # ------------------------------------------------------------------ entry point
    def __call__(self, weights: Mapping[str, torch.Tensor] | AdapterWeights,
                 engine: SGLangRolloutEngine, version: int) -> None:
        if isinstance(weights, AdapterWeights):
            started = time.monotonic()
            try:
                self._adapter(engine, weights, int(version))
            except ServerError as exc:
                raise ServerError(f"adapter update to version {version} failed: {exc}") from exc
            engine.stamp_version(version)
            self.last_update_s = time.monotonic() - started
            return
        if not weights:
            raise ValueError(
                "sglang weight sync got an empty state dict: with several training ranks only "
                "rank 0 holds the full weights; sync from rank 0"
            )
        engine.check_names(weights, version)
        sync = self.options
        started = time.monotonic()
        transport = {"tensor": self._tensor, "distributed": self._distributed,
                     "disk": self._disk}[sync.transport]
        try:
            transport(engine, weights, int(version))
            self._check_versions(engine, int(version))
        except ServerError as exc:
            raise ServerError(
                f"weight update to version {version} ({sync.transport} transport) failed: {exc}"
            ) from exc
        engine.stamp_version(version)
        self.last_update_s = time.monotonic() - started

    def _check_versions(self, engine: SGLangRolloutEngine, version: int) -> None:
        async def check(replica: Replica) -> None:
            info = await engine.get(replica, "/model_info", timeout_s=self.options.timeout_s)
            reported = str((info or {}).get("weight_version"))
            if reported != str(version):
                raise ServerError(
                    f"server {replica.name} reports weight version {reported!r} after the update "
                    f"to {version}: the update did not take effect{replica.log_suffix()}"
                )

        engine.on_replicas(check)

    # ------------------------------------------------------------------ HTTP helpers
    @staticmethod
    def _call(engine: SGLangRolloutEngine, path: str, body: dict[str, Any] | None,
              timeout_s: float) -> ReplicaCall:
        """POST ``body`` to one replica and check SGLang's ``success`` flag."""

        async def one(replica: Replica) -> None:
            answer = await engine.post(replica, path, body, timeout_s=timeout_s)
            if isinstance(answer, dict) and answer.get("success") is False:
                raise ServerError(
                    f"server {replica.name} refused POST {path}: {answer.get('message')}")

        return one

    def _all(self, engine: SGLangRolloutEngine, path: str, body: dict[str, Any] | None,
             timeout_s: float | None = None) -> None:
        """POST ``body`` to every replica (blocking), each answer checked."""
        engine.on_replicas(self._call(engine, path, body, timeout_s or self.options.timeout_s))

    def _in_session(self, engine: SGLangRolloutEngine, send: Callable[[], None]) -> None:
        """``send()`` between ``/begin_weight_update`` and ``/end_weight_update`` on every
        replica."""
        self._all(engine, "/begin_weight_update", {"selector": "all"})
        try:
            send()
        except BaseException:
            # Close the session, but report the failure that matters, not this one.
            with contextlib.suppress(ServerError):
                self._all(engine, "/end_weight_update", {})
            raise
        self._all(engine, "/end_weight_update", {})

    def _update_body(self, version: int, last: bool) -> dict[str, Any]:
        # The version (and the cache flush) go with the last bucket, once the weights are whole.
        return {
            "flush_cache": self.options.flush_cache and last,
            "weight_version": str(version) if last else None,
            "abort_all_requests": False,
        }

    # ------------------------------------------------------------------ transports
    def _buckets(self, weights: Mapping[str, torch.Tensor]) -> Any:
        """``(bucket, is_last)``, made as they are sent (two buckets of copies at most, one
        looked ahead). Copies: the ``tensor`` transport moves a bucket's storage into shared
        memory, which must not happen to the actor's own tensors."""
        made = buckets(weights, self.options.bucket_mb << 20, copy=True)
        return with_last(list(b.items()) for b in made)

    def _tensor(self, engine: SGLangRolloutEngine, weights: Mapping[str, torch.Tensor],
                version: int) -> None:
        tp = engine.options.tensor_parallel_size

        def send() -> None:
            for bucket, last in self._buckets(weights):
                payload = serialize_bucket(bucket)  # `bucket` keeps the shared memory alive
                body = {"serialized_named_tensors": [payload] * tp,  # one entry per TP rank
                        **self._update_body(version, last)}
                self._all(engine, "/update_weights_from_tensor", body)

        self._in_session(engine, send)

    def _disk(self, engine: SGLangRolloutEngine, weights: Mapping[str, torch.Tensor],
              version: int) -> None:
        from safetensors.torch import save_file

        options = self.options
        staging = Path(options.staging_dir) if options.staging_dir else engine.workdir / "weights"
        staging.mkdir(parents=True, exist_ok=True)
        tmp = staging / ".model.safetensors.tmp"
        save_file(dict(cpu_tensors(weights)), str(tmp))  # tied weights made separate
        os.replace(tmp, staging / "model.safetensors")  # the server loads every *.safetensors there
        body = {"model_path": str(staging), **self._update_body(version, True)}
        self._all(engine, "/update_weights_from_disk", body)

    def _distributed(self, engine: SGLangRolloutEngine, weights: Mapping[str, torch.Tensor],
                     version: int) -> None:
        if self._group is not None and self._group_engine is not engine:
            self.close()  # another engine's servers: leave their group, join this one's
        if self._group is None:
            self._join_group(engine)
        device = engine.spec.device if self._backend(engine) == "nccl" else "cpu"

        def send() -> None:
            for bucket, last in self._buckets(weights):
                body = {
                    "names": [n for n, _ in bucket],
                    "dtypes": [dtype_name(t) for _, t in bucket],
                    "shapes": [list(t.shape) for _, t in bucket],
                    "group_name": self._group_name,
                    **self._update_body(version, last),
                }
                self._broadcast_while(engine, body, [t.to(device) for _, t in bucket])

        try:
            self._in_session(engine, send)
        except BaseException:
            self._drop_group()  # a broadcast may have been cut halfway: rejoin next time
            raise

    def _adapter(self, engine: SGLangRolloutEngine, adapter: AdapterWeights,
                 version: int) -> None:
        """Load the adapter of ``version`` on every server, serve it, drop the previous one."""
        options = self.options
        staging = Path(options.staging_dir) if options.staging_dir else engine.workdir / "weights"
        staging.mkdir(parents=True, exist_ok=True)
        tmp, directory = staging / f".adapter-v{version}.tmp", staging / f"adapter-v{version}"
        shutil.rmtree(tmp, ignore_errors=True)  # left by a sync that failed half-way
        adapter.save(tmp)
        shutil.rmtree(directory, ignore_errors=True)  # this sync's own, from a run resumed
        os.replace(tmp, directory)  # the servers never see a half-written adapter
        name, previous = f"{ADAPTER_PREFIX}{version}", engine.adapter
        self._all(engine, "/load_lora_adapter", {"lora_name": name, "lora_path": str(directory)})
        engine.serve_adapter(name)
        if previous is not None and previous != name:
            self._all(engine, "/unload_lora_adapter", {"lora_name": previous})
            shutil.rmtree(staging / f"adapter-v{previous.removeprefix(ADAPTER_PREFIX)}",
                          ignore_errors=True)

    # ------------------------------------------------------------------ the distributed group
    def _backend(self, engine: SGLangRolloutEngine) -> str:
        if self.options.group_backend != "auto":
            return self.options.group_backend
        return "nccl" if engine.spec.device.startswith("cuda") else "gloo"

    def _join_group(self, engine: SGLangRolloutEngine) -> None:
        """Make the group: the servers join from their side while this process joins as rank 0."""
        sync = self.options
        replicas = engine.replicas
        tp = engine.options.tensor_parallel_size
        world_size = 1 + tp * len(replicas)
        port, name = free_port(), f"rlctl-sglang-{uuid.uuid4().hex[:12]}"
        backend = self._backend(engine)

        async def join(replica: Replica, offset: int) -> None:
            body = {"master_address": sync.master_address, "master_port": port,
                    "rank_offset": offset, "world_size": world_size, "group_name": name,
                    "backend": backend}
            answer = await engine.post(replica, "/init_weights_update_group", body,
                                       timeout_s=sync.timeout_s)
            if isinstance(answer, dict) and answer.get("success") is False:
                raise ServerError(f"server {replica.name} could not join the weight-update "
                                  f"group: {answer.get('message')}")

        # The servers' calls block until every rank has joined: they run on the HTTP loop while
        # this thread joins as rank 0.
        joins = [engine.schedule(join(r, 1 + i * tp)) for i, r in enumerate(replicas)]
        try:
            group = new_group_as_rank0(sync.master_address, port, world_size, name, backend,
                                       sync.timeout_s)
        except Exception as exc:
            for j in joins:
                j.cancel()
            errors = [str(j.exception()) for j in joins
                      if j.done() and not j.cancelled() and j.exception()]
            raise ServerError(
                f"this process could not make the weight-update group {name} with "
                f"{', '.join(r.name for r in replicas)} within {sync.timeout_s:.0f} s: "
                f"{type(exc).__name__}: {exc}" + (f"; servers said: {errors}" if errors else "")
            ) from exc
        for j in joins:
            j.result(timeout=sync.timeout_s)
        self._group, self._group_name, self._group_engine = group, name, engine

    def _broadcast_while(self, engine: SGLangRolloutEngine, body: dict[str, Any],
                         tensors: list[torch.Tensor]) -> None:
        """Broadcast ``tensors`` (rank 0) while the servers' ``update_weights_from_distributed``
        request is in flight; a server that refuses the request fails this at once, not at the
        group's timeout."""
        import torch.distributed as dist

        timeout_s = self.options.timeout_s
        call = self._call(engine, "/update_weights_from_distributed", body, timeout_s)

        async def every() -> None:
            await asyncio.gather(*(call(r) for r in engine.replicas))

        request: concurrent.futures.Future[None] = engine.schedule(every())
        works = [dist.broadcast(t, src=0, group=self._group, async_op=True) for t in tensors]
        deadline = time.monotonic() + timeout_s
        while not all(w.is_completed() for w in works):
            if request.done() and request.exception() is not None:
                raise request.exception()  # type: ignore[misc]
            if time.monotonic() > deadline:
                request.cancel()
                raise ServerError(
                    f"broadcasting {len(tensors)} tensors to the servers took more than "
                    f"{timeout_s:.0f} s"
                )
            time.sleep(0.005)
        for w in works:
            w.wait()  # raises if the transfer failed
        request.result(timeout=max(1.0, deadline - time.monotonic()))

    def _drop_group(self) -> None:
        group, self._group, self._group_engine = self._group, None, None
        if group is not None:
            import torch.distributed as dist

            with contextlib.suppress(Exception):
                dist.destroy_process_group(group)

    def close(self) -> None:
        """Leave the ``distributed`` group on both sides; call it before the engine closes
        (servers that are gone, or an engine already closed, are skipped)."""
        engine = self._group_engine
        if self._group is None or engine is None:
            return
        with contextlib.suppress(Exception):
            live = [r for r in engine.replicas if r.process is None or r.process.alive()]
            if live:
                body = {"group_name": self._group_name}
                engine.on_replicas(self._call(engine, "/destroy_weights_update_group", body, 30.0))
        self._drop_group()


def new_group_as_rank0(address: str, port: int, world_size: int, name: str, backend: str,
                       timeout_s: float) -> Any:
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
        world, rank, [], Backend(backend), store, group_name=name, backend_options=None,
        timeout=timeout
    )
    _world.pg_group_ranks[group] = {i: i for i in range(world)}  # lets dist.broadcast take it
    return group
