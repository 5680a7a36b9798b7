"""The ``vllm`` weight sync: vLLM's native weight-transfer lifecycle, driven over HTTP.

One sync, on every replica of a :class:`~rlctl.engines.rollout.vllm.engine.VLLMRolloutEngine`::

    /init_weight_transfer_engine            (once per server)
    /pause?mode=<pause_mode>                requests in flight finish (wait) or fail (abort)
    /start_weight_update                    vLLM starts its layerwise reload
    /update_weights {"update_info": ...}    once per bucket of about bucket_mb
    /finish_weight_update {"weight_version": "<version>"}
    /reset_prefix_cache                     its KV was computed by the old weights
    /resume
    GET /weight_info                        must report <version>, or the sync fails

Options: ``[engines.rollout.weight_sync_options]`` (:class:`VLLMWeightSyncOptions`), handed to
the sync and, through ``RolloutEngineSpec.weight_sync_options``, to the engine, whose servers
start with the matching ``--weight-transfer-config``. The sync owns its state (which servers
have a transfer engine, the CUDA trainer side) and uses only the engine's public surface
(``replicas``, ``post`` / ``get``, ``on_replicas``, ``run``, ``check_names``, ``stamp_version``).

Transports (``transport``):

- ``file``: each bucket is written to a safetensors file in the staging directory and the
  server loads it (``{"path": ...}``); the servers must share this machine's filesystem.
- ``http_bytes``: each bucket's safetensors bytes travel base64-encoded in the request body
  (``{"safetensors_b64": ...}``); works with servers on other machines.
  Both are received by rlctl's ``rlctl_cpu`` transfer engine inside the server
  (``rlctl/engines/rollout/vllm/worker/rlctl_vllm_ext.py``); tensors always travel as safetensors.
- ``nccl`` / ``ipc``: vLLM's own CUDA backends, driven by vLLM's trainer-side engines
  (``WeightTransferTrainerFactory.trainer_init(...).send_weights()``) through a client that
  speaks to the server over this engine's HTTP loop; see
  :mod:`rlctl.engines.rollout.vllm.cuda_transfer`.

Buckets (:mod:`rlctl.engines.rollout.buckets`) go to all replicas in lockstep (bucket ``i`` is
sent to every server before bucket ``i + 1`` is built), so at most one bucket is held in memory.

``method = "reload"`` keeps the older path: the whole state dict in one safetensors file, then
on every server ``/pause``, ``/collective_rpc reload_weights`` from it (vLLM CPU repacks its
linear weights after loading, so a plain ``load_weights`` would fail; the worker's
``reload_weights`` repacks), ``/reset_prefix_cache``, ``/resume``. The servers need no
transfer engine for it; they must be able to read the file (a shared filesystem).

LoRA adapters (``[engines.rollout] lora_sync = "adapter"``: ``weights`` is an
:class:`~rlctl.models.lora.AdapterWeights`): the adapter is written in PEFT's format to
``adapter-v<version>/`` in the staging directory (the servers must read it: a shared
filesystem, whatever the transport), then on every server ``/pause``,
``/v1/load_lora_adapter`` under the name ``rlctl-lora-v<version>`` (a new name each version:
vLLM's prefix cache keys on it), ``/reset_prefix_cache``, ``/resume``; the engine's requests ask
for the new name from then on, every server must list it (``GET /v1/models``), and the
previous version is unloaded and its files removed. Only the adapters move.

Every failure names the server (and quotes its log when the engine started it); every request
has ``timeout_s``; on a failure the servers are resumed best-effort so none stays paused.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlctl.engines.rollout.buckets import buckets, cpu_tensors
from rlctl.engines.rollout.contract import WeightSync
from rlctl.engines.rollout.server.client import Replica
from rlctl.engines.rollout.server.process import ServerError
from rlctl.engines.rollout.vllm.options import VLLMWeightSyncOptions
from rlctl.models.lora import AdapterWeights

if TYPE_CHECKING:
    import torch

    from rlctl.engines.rollout.vllm.cuda_transfer import CUDATransfer
    from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine

ReplicaCall = Callable[[Replica], Coroutine[Any, Any, Any]]
ADAPTER_PREFIX = "rlctl-lora-v"
"""The served name of the adapter of version N is ``rlctl-lora-vN``."""


class VLLMWeightSync(WeightSync):
    """Weight-sync plugin ``vllm``: ``sync(weights, engine, version)`` (module docstring)."""

    def __init__(self, options: VLLMWeightSyncOptions | None = None) -> None:
        self.options = options or VLLMWeightSyncOptions()
        self._initialized: set[str] = set()  # URLs whose transfer engine is initialised
        self._cuda: CUDATransfer | None = None  # built at the first nccl / ipc sync
        self.last_update_s = 0.0
        """Seconds the last sync took (pause to version check)."""

    def __call__(self, weights: Mapping[str, torch.Tensor] | AdapterWeights,
                 engine: VLLMRolloutEngine, version: int) -> None:
        if isinstance(weights, AdapterWeights):
            started = time.monotonic()
            try:
                self._sync_adapter(weights, engine, version, self.options)
            except ServerError as exc:
                raise ServerError(f"vllm adapter sync to version {version} failed: {exc}") \
                    from exc
            engine.stamp_version(version)
            self.last_update_s = time.monotonic() - started
            return
        if not weights:
            raise ValueError(
                "vllm weight sync got an empty state dict: with several training ranks only "
                "rank 0 holds the full weights; sync from rank 0"
            )
        options = self.options
        self._check_servers(engine)
        engine.check_names(weights, version)
        started = time.monotonic()
        try:
            if options.method == "reload":
                self._reload(weights, engine, options)
            else:
                if options.transport in ("nccl", "ipc"):
                    self._sync_cuda(weights, engine, version, options)
                else:
                    self._sync_cpu(weights, engine, version, options)
                self._check_versions(engine, version, options)
        except ServerError as exc:
            raise ServerError(f"vllm weight sync to version {version} failed: {exc}") from exc
        engine.stamp_version(version)
        self.last_update_s = time.monotonic() - started

    def _check_servers(self, engine: VLLMRolloutEngine) -> None:
        """Servers the engine started must have the transfer backend this sync drives."""
        needed = self.options.server_backend
        if needed is None or not engine.servers or engine.transfer_backend == needed:
            return
        raise ValueError(
            f"the vllm weight sync needs servers started with the {needed!r} weight-transfer "
            f"backend, but the engine started its servers with {engine.transfer_backend!r}: "
            "build the engine with the same [engines.rollout.weight_sync_options] "
            "(RolloutEngineSpec.weight_sync_options) as the sync"
        )

    # ------------------------------------------------------------------ lifecycle
    @staticmethod
    def _post(engine: VLLMRolloutEngine, path: str, body: dict[str, Any] | None,
              options: VLLMWeightSyncOptions) -> ReplicaCall:
        def call(replica: Replica) -> Coroutine[Any, Any, Any]:
            return engine.post(replica, path, body, timeout_s=options.timeout_s)
        return call

    def _init_engines(self, engine: VLLMRolloutEngine, options: VLLMWeightSyncOptions,
                      init_info: dict[str, Any]) -> None:
        async def init(replica: Replica) -> None:
            if replica.url in self._initialized:
                return
            try:
                await engine.post(replica, "/init_weight_transfer_engine",
                                  {"init_info": init_info}, timeout_s=options.timeout_s)
            except ServerError as exc:
                if " with HTTP " not in str(exc):  # transport failure (dead, hung): no hint
                    raise
                raise ServerError(
                    f"{exc}\nserver {replica.name} has no weight transfer engine: a server rlctl "
                    "did not start needs --weight-transfer-config '{\"backend\": \""
                    f"{options.server_backend}\"}}' (and, for file / http_bytes, "
                    "--worker-extension-cls rlctl_vllm_ext.RlctlWorkerExtension with "
                    "rlctl/engines/rollout/vllm/worker on its PYTHONPATH), "
                    "or set weight_sync_options.method = \"reload\""
                ) from exc
            self._initialized.add(replica.url)

        engine.on_replicas(init)

    def paused(self, engine: VLLMRolloutEngine, options: VLLMWeightSyncOptions,
               transfer: Callable[[], None]) -> None:
        """Pause every server, run ``transfer``, reset prefix caches, resume (also on failure)."""
        try:
            # Inside the try: when one server fails to pause, the others must not stay paused.
            engine.on_replicas(self._post(engine, f"/pause?mode={options.pause_mode}", None,
                                          options))
            transfer()
            engine.on_replicas(self._post(engine, "/reset_prefix_cache", None, options))
        except BaseException:
            # Un-pause what still answers, but report the failure that matters, not this one.
            with contextlib.suppress(ServerError):
                engine.on_replicas(self._post(engine, "/resume", None, options))
            raise
        engine.on_replicas(self._post(engine, "/resume", None, options))

    def _sync_cpu(self, weights: Mapping[str, torch.Tensor], engine: VLLMRolloutEngine,
                  version: int, options: VLLMWeightSyncOptions) -> None:
        """``file`` / ``http_bytes`` through the rlctl_cpu engine in each server."""
        self._init_engines(engine, options, {})
        staging = _staging_dir(engine, options)

        def transfer() -> None:
            engine.on_replicas(self._post(engine, "/start_weight_update", None, options))
            for i, bucket in enumerate(buckets(weights, int(options.bucket_mb * 2**20))):
                path = staging / f"v{version}-{i}.safetensors"
                with bucket_payload(bucket, options.transport, path) as info:
                    if i == 0:  # the server checks every name before it touches its weights
                        info = {**info, "all_names": list(weights)}
                    engine.on_replicas(self._post(engine, "/update_weights",
                                                  {"update_info": info}, options))
            engine.on_replicas(self._post(
                engine, "/finish_weight_update", {"weight_version": str(version)}, options))

        self.paused(engine, options, transfer)

    def _sync_cuda(self, weights: Mapping[str, torch.Tensor], engine: VLLMRolloutEngine,
                   version: int, options: VLLMWeightSyncOptions) -> None:
        """``nccl`` / ``ipc`` through vLLM's trainer-side engines (CUDA only; not run on CPU
        here)."""
        from rlctl.engines.rollout.vllm.cuda_transfer import CUDATransfer

        if self._cuda is None:
            self._cuda = CUDATransfer(engine, options)
        cuda = self._cuda
        self.paused(engine, options, lambda: cuda.send(weights, version))

    def _check_versions(self, engine: VLLMRolloutEngine, version: int,
                        options: VLLMWeightSyncOptions) -> None:
        """Every server must report the version just finished (``GET /weight_info``)."""
        async def check(replica: Replica) -> None:
            data = await engine.get(replica, "/weight_info", timeout_s=options.timeout_s)
            reported = (data or {}).get("weight_version")
            if reported != str(version):
                raise ServerError(
                    f"server {replica.name} reports weight version {reported!r} after the "
                    f"update to version {version}: the update did not take effect there"
                    f"{replica.log_suffix()}"
                )

        engine.on_replicas(check)

    # ------------------------------------------------------------------ LoRA adapters
    def _sync_adapter(self, adapter: AdapterWeights, engine: VLLMRolloutEngine, version: int,
                      options: VLLMWeightSyncOptions) -> None:
        """Load the adapter of ``version`` on every server, serve it, drop the previous one."""
        staging = _staging_dir(engine, options)
        tmp = staging / f".adapter-v{version}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)  # left by a sync that failed half-way
        adapter.save(tmp)
        directory = staging / f"adapter-v{version}"
        shutil.rmtree(directory, ignore_errors=True)  # this sync's own, from a run resumed
        os.replace(tmp, directory)  # the servers never see a half-written adapter
        name, previous = f"{ADAPTER_PREFIX}{version}", engine.adapter
        body = {"lora_name": name, "lora_path": str(directory)}

        def transfer() -> None:
            engine.on_replicas(self._post(engine, "/v1/load_lora_adapter", body, options))
            engine.serve_adapter(name)

        self.paused(engine, options, transfer)

        async def listed(replica: Replica) -> None:
            data = await engine.get(replica, "/v1/models", timeout_s=options.timeout_s)
            served = {m.get("id") for m in (data or {}).get("data", [])}
            if name not in served:
                raise ServerError(f"server {replica.name} does not list adapter {name} after "
                                  f"loading it{replica.log_suffix()}")

        engine.on_replicas(listed)
        if previous is not None and previous != name:
            engine.on_replicas(self._post(engine, "/v1/unload_lora_adapter",
                                          {"lora_name": previous}, options))
            old = staging / f"adapter-v{previous.removeprefix(ADAPTER_PREFIX)}"
            shutil.rmtree(old, ignore_errors=True)

    # ------------------------------------------------------------------ reload
    def _reload(self, weights: Mapping[str, torch.Tensor], engine: VLLMRolloutEngine,
                options: VLLMWeightSyncOptions) -> None:
        """``method = "reload"``: one file, then ``/collective_rpc reload_weights`` per server."""
        from safetensors.torch import save_file

        staging = _staging_dir(engine, options)
        tmp = staging / ".model.safetensors.tmp"
        save_file(dict(cpu_tensors(weights)), str(tmp))
        # One fixed path: reload_weights repoints the server's model path at this directory.
        os.replace(tmp, staging / "model.safetensors")
        rpc = {"method": "reload_weights", "kwargs": {"weights_path": str(staging)}}

        async def update(replica: Replica) -> None:
            # In-flight requests finish on the old weights (mode wait); new ones wait for /resume.
            post = engine.post
            await post(replica, f"/pause?mode={options.pause_mode}", timeout_s=options.timeout_s)
            try:
                await post(replica, "/collective_rpc", rpc, timeout_s=options.timeout_s)
                # its KV was computed by the old weights
                await post(replica, "/reset_prefix_cache", timeout_s=options.timeout_s)
            except BaseException:
                # Try to un-pause, but report the failure that matters, not this one.
                with contextlib.suppress(ServerError):
                    await post(replica, "/resume", timeout_s=options.timeout_s)
                raise
            await post(replica, "/resume", timeout_s=options.timeout_s)

        engine.on_replicas(update)


def _staging_dir(engine: VLLMRolloutEngine, options: VLLMWeightSyncOptions) -> Path:
    staging = Path(options.staging_dir) if options.staging_dir else engine.workdir / "weights"
    staging.mkdir(parents=True, exist_ok=True)
    return staging


@contextlib.contextmanager
def bucket_payload(bucket: dict[str, torch.Tensor], transport: str,
                   path: Path) -> Iterator[dict[str, str]]:
    """The ``update_info`` of one bucket; a ``file`` bucket's file is removed afterwards."""
    if transport == "http_bytes":
        from safetensors.torch import save

        yield {"safetensors_b64": base64.b64encode(save(bucket)).decode("ascii")}
        return
    from safetensors.torch import save_file

    tmp = path.with_name("." + path.name + ".tmp")
    save_file(bucket, str(tmp))
    os.replace(tmp, path)  # the server never sees a half-written file
    try:
        yield {"path": str(path)}
    finally:
        path.unlink(missing_ok=True)
