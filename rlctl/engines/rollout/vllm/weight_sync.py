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

Transports (``[engines.rollout.options.weight_sync] transport``):

- ``file``: each bucket is written to a safetensors file in the staging directory and the
  server loads it (``{"path": ...}``); the servers must share this machine's filesystem.
- ``http_bytes``: each bucket's safetensors bytes travel base64-encoded in the request body
  (``{"safetensors_b64": ...}``); works with servers on other machines.
  Both are received by rlctl's ``rlctl_cpu`` transfer engine inside the server
  (``rlctl/engines/rollout/vllm/worker/rlctl_vllm_ext.py``); tensors always travel as safetensors.
- ``nccl`` / ``ipc``: vLLM's own CUDA backends, driven by vLLM's trainer-side engines
  (``WeightTransferTrainerFactory.trainer_init(...).send_weights()``) through a client that
  speaks to the server over this engine's HTTP loop; see :mod:`rlctl.engines.rollout.vllm.cuda_transfer`.

Buckets go to all replicas in lockstep (bucket ``i`` is sent to every server before bucket
``i + 1`` is built), so at most one bucket is held in memory. ``method = "reload"`` keeps the
older path: the engine's own :meth:`~rlctl.engines.rollout.vllm.engine.VLLMRolloutEngine.update_weights`
(one file, ``/collective_rpc reload_weights``).

Every failure names the server (and quotes its log when the engine started it); every request
has ``timeout_s``; on a failure the servers are resumed best-effort so none stays paused.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlctl.engines.rollout.server.client import Replica
from rlctl.engines.rollout.server.process import ServerError
from rlctl.engines.rollout.vllm.options import VLLMWeightSyncOptions

if TYPE_CHECKING:
    import torch

    from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine

ReplicaCall = Callable[[Replica], Coroutine[Any, Any, Any]]


def cpu_tensors(state_dict: Mapping[str, torch.Tensor]) -> Iterator[tuple[str, torch.Tensor]]:
    """Contiguous CPU copies of the tensors, tied (shared-storage) ones made separate.

    safetensors refuses tensors that share storage (a tied LM head and the embedding).
    """
    seen: set[int] = set()
    for name, tensor in state_dict.items():
        t = tensor.detach().to("cpu").contiguous()
        if t.data_ptr() in seen:
            t = t.clone()
        seen.add(t.data_ptr())
        yield name, t


def buckets(state_dict: Mapping[str, torch.Tensor], bucket_bytes: int) -> Iterator[dict[str, torch.Tensor]]:
    """Consecutive groups of tensors of at most ``bucket_bytes`` (a larger tensor goes alone)."""
    bucket: dict[str, torch.Tensor] = {}
    size = 0
    for name, t in cpu_tensors(state_dict):
        nbytes = t.numel() * t.element_size()
        if bucket and size + nbytes > bucket_bytes:
            yield bucket
            bucket, size = {}, 0
        bucket[name] = t
        size += nbytes
    if bucket:
        yield bucket


class VLLMWeightSync:
    """Weight-sync plugin ``vllm``: ``sync(weights, rollout, version)`` (see the module docstring).

    The options that count are the rollout engine's ``[engines.rollout.options.weight_sync]``:
    the transfer backend is fixed when its servers start. Options handed to this constructor
    (the registry's) must agree with them unless left at their defaults.
    """

    def __init__(self, options: VLLMWeightSyncOptions | None = None) -> None:
        self.options = options
        self._initialized: set[str] = set()  # URLs whose transfer engine is initialised
        self._cuda: Any = None  # vllm_cuda_transfer.CUDATransfer, built at the first nccl/ipc sync
        self.last_update_s = 0.0

    def effective_options(self, rollout: VLLMRolloutEngine) -> VLLMWeightSyncOptions:
        engine_options: VLLMWeightSyncOptions = rollout.options.weight_sync
        given = self.options
        if given is not None and given != VLLMWeightSyncOptions() and given != engine_options:
            raise ValueError(
                f"vllm weight sync options {given.model_dump(exclude_defaults=True)} differ from the "
                f"rollout engine's {engine_options.model_dump(exclude_defaults=True)}; the servers "
                "are started for the engine's: set them in [engines.rollout.options.weight_sync]"
            )
        return engine_options

    def __call__(self, weights: Mapping[str, torch.Tensor], rollout: VLLMRolloutEngine, version: int) -> None:
        if not weights:
            raise ValueError("vllm weight sync got an empty state dict: export from training rank 0")
        options = self.effective_options(rollout)
        started = time.monotonic()
        if options.method == "reload":
            rollout.update_weights(weights, version)
        else:
            rollout.check_names(weights, version)
            try:
                if options.transport in ("nccl", "ipc"):
                    self._sync_cuda(weights, rollout, version, options)
                else:
                    self._sync_cpu(weights, rollout, version, options)
                self._check_versions(rollout, version, options)
            except ServerError as exc:
                raise ServerError(f"vllm weight sync to version {version} failed: {exc}") from exc
            rollout.stamp_version(version)
        self.last_update_s = rollout.last_update_s = time.monotonic() - started

    # ------------------------------------------------------------------ lifecycle
    def _on_all(self, rollout: VLLMRolloutEngine, call: ReplicaCall) -> None:
        """Run ``call(replica)`` on every replica at once; wait for all, then raise the first error.

        Waiting for all (not failing fast) keeps the servers in step: a resume is never sent
        while another request of the same phase is still running on that server.
        """
        replicas = rollout.replicas

        async def run() -> list[Any]:
            return list(await asyncio.gather(*(call(r) for r in replicas), return_exceptions=True))

        errors = [e for e in rollout.require_http().run(run()) if isinstance(e, BaseException)]
        if errors:
            raise errors[0]

    def _post(self, rollout: VLLMRolloutEngine, path: str, body: dict[str, Any] | None,
              options: VLLMWeightSyncOptions) -> ReplicaCall:
        def call(replica: Replica) -> Coroutine[Any, Any, Any]:
            return rollout._post(replica, path, body, timeout_s=options.timeout_s)
        return call

    def _init_engines(self, rollout: VLLMRolloutEngine, options: VLLMWeightSyncOptions,
                      init_info: dict[str, Any]) -> None:
        async def init(replica: Replica) -> None:
            if replica.url in self._initialized:
                return
            try:
                await rollout._post(replica, "/init_weight_transfer_engine", {"init_info": init_info},
                                    timeout_s=options.timeout_s)
            except ServerError as exc:
                if " with HTTP " not in str(exc):  # transport failure (dead, hung): no hint
                    raise
                raise ServerError(
                    f"{exc}\nserver {replica.name} has no weight transfer engine: a server rlctl "
                    "did not start needs --weight-transfer-config '{\"backend\": \""
                    f"{options.server_backend}\"}}' (and, for file / http_bytes, --worker-extension-cls "
                    "rlctl_vllm_ext.RlctlWorkerExtension with rlctl/engines/rollout/vllm/worker on its PYTHONPATH), "
                    "or set weight_sync.method = \"reload\""
                ) from exc
            self._initialized.add(replica.url)

        self._on_all(rollout, init)

    def paused(self, rollout: VLLMRolloutEngine, options: VLLMWeightSyncOptions,
               transfer: Callable[[], None]) -> None:
        """Pause every server, run ``transfer``, reset prefix caches, resume (also on failure)."""
        try:
            # Inside the try: when one server fails to pause, the others must not stay paused.
            self._on_all(rollout, self._post(rollout, f"/pause?mode={options.pause_mode}", None, options))
            transfer()
            self._on_all(rollout, self._post(rollout, "/reset_prefix_cache", None, options))
        except BaseException:
            # Un-pause what still answers, but report the failure that matters, not this one.
            with contextlib.suppress(ServerError):
                self._on_all(rollout, self._post(rollout, "/resume", None, options))
            raise
        self._on_all(rollout, self._post(rollout, "/resume", None, options))

    def _sync_cpu(self, weights: Mapping[str, torch.Tensor], rollout: VLLMRolloutEngine, version: int,
                  options: VLLMWeightSyncOptions) -> None:
        """``file`` / ``http_bytes`` through the rlctl_cpu engine in each server."""
        self._init_engines(rollout, options, {})
        staging = Path(options.staging_dir) if options.staging_dir else rollout.workdir / "weights"
        staging.mkdir(parents=True, exist_ok=True)

        def transfer() -> None:
            self._on_all(rollout, self._post(rollout, "/start_weight_update", None, options))
            for i, bucket in enumerate(buckets(weights, int(options.bucket_mb * 2**20))):
                with bucket_payload(bucket, options.transport, staging / f"v{version}-{i}.safetensors") as info:
                    if i == 0:  # the server checks every name before it touches its weights
                        info = {**info, "all_names": list(weights)}
                    self._on_all(rollout, self._post(rollout, "/update_weights", {"update_info": info}, options))
            self._on_all(rollout, self._post(
                rollout, "/finish_weight_update", {"weight_version": str(version)}, options))

        self.paused(rollout, options, transfer)

    def _sync_cuda(self, weights: Mapping[str, torch.Tensor], rollout: VLLMRolloutEngine, version: int,
                   options: VLLMWeightSyncOptions) -> None:
        """``nccl`` / ``ipc`` through vLLM's trainer-side engines (CUDA only; not run on CPU here)."""
        from rlctl.engines.rollout.vllm.cuda_transfer import CUDATransfer

        if self._cuda is None:
            self._cuda = CUDATransfer(rollout, options)
        self.paused(rollout, options, lambda: self._cuda.send(weights, version))

    def _check_versions(self, rollout: VLLMRolloutEngine, version: int, options: VLLMWeightSyncOptions) -> None:
        """Every server must report the version just finished (``GET /weight_info``)."""
        async def check(replica: Replica) -> None:
            http = rollout.require_http()
            url = replica.url + "/weight_info"
            try:
                async with http.session.get(url, timeout=_timeout(options.timeout_s)) as resp:
                    data = await resp.json(content_type=None)
            except Exception as exc:
                raise ServerError(
                    f"GET {url} to server {replica.name} failed: {type(exc).__name__}: {exc}"
                    f"{replica.dead_suffix()}"
                ) from exc
            reported = (data or {}).get("weight_version")
            if reported != str(version):
                raise ServerError(
                    f"server {replica.name} reports weight version {reported!r} after the update to "
                    f"version {version}: the update did not take effect there{replica.log_suffix()}"
                )

        self._on_all(rollout, check)


@contextlib.contextmanager
def bucket_payload(bucket: dict[str, torch.Tensor], transport: str, path: Path) -> Iterator[dict[str, str]]:
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


def _timeout(seconds: float) -> Any:
    import aiohttp

    return aiohttp.ClientTimeout(total=seconds)
