"""rlctl's side inside a vLLM server: a CPU-capable weight-transfer engine and a worker extension.

This file runs in vLLM's own Python environment, where rlctl is NOT installed: it imports only
vllm, torch, safetensors and the standard library. The launcher puts this directory (alone) on
the server's ``PYTHONPATH`` and starts the server with
``--worker-extension-cls rlctl_vllm_ext.RlctlWorkerExtension`` and
``--weight-transfer-config '{"backend": "rlctl_cpu"}'``. vLLM imports the extension module in
each worker before it loads the model, so the engine registered below exists by the time the
worker asks ``WeightTransferEngineFactory`` for the configured backend.

Transfer (vLLM's native RL lifecycle, driven over HTTP by
``rlctl.engines.rollout.vllm.weight_sync``):
``/init_weight_transfer_engine`` once, then per sync ``/start_weight_update``,
``/update_weights`` once per bucket, ``/finish_weight_update``. A bucket is a safetensors file
(``{"path": ...}``, the ``file`` transport) or safetensors bytes in base64
(``{"safetensors_b64": ...}``, the ``http_bytes`` transport). Safetensors, never pickle: the
bytes come from a socket.

Loading uses vLLM's layerwise reload (``initialize_layerwise_reload`` at start,
``model.load_weights`` per bucket, ``finalize_layerwise_reload`` at finish), like its NCCL
engine: on CPU, vLLM repacks linear weights after loading, so a bare ``load_weights`` fails.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import load_file
from vllm.distributed.weight_transfer.base import (
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)
from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory

BACKEND = "rlctl_cpu"
"""The name servers are started with (``--weight-transfer-config {"backend": "rlctl_cpu"}``)."""

# Tied LM heads are absent from checkpoints but present in a trainer's full state dict;
# vLLM's load_weights skips them.
_TIED_NAMES = frozenset({"lm_head.weight"})


@dataclass
class RlctlInitInfo(WeightTransferInitInfo):
    """Nothing to rendezvous: the data travels in (or next to) each HTTP request."""


@dataclass
class RlctlUpdateInfo(WeightTransferUpdateInfo):
    """One bucket: a safetensors file on a shared filesystem, or its bytes in base64.

    ``all_names`` (first bucket of a sync): every name the sync will send, checked before the
    layerwise reload starts, so a bad name leaves the served weights untouched.
    """

    path: str | None = None
    safetensors_b64: str | None = None
    all_names: list[str] | None = None

    def __post_init__(self) -> None:
        if (self.path is None) == (self.safetensors_b64 is None):
            raise ValueError(
                "rlctl_cpu update_info needs exactly one of 'path' or 'safetensors_b64'"
            )


def checkpoint_names(model_dir: str) -> frozenset[str] | None:
    """Tensor names of a local checkpoint's safetensors files; ``None`` if it has none."""
    root = Path(model_dir)
    files = sorted(root.glob("*.safetensors")) if root.is_dir() else []
    if not files:
        return None
    names: set[str] = set()
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            names.update(f.keys())
    return frozenset(names)


class RlctlCPUTransferEngine(WeightTransferEngine[RlctlInitInfo, RlctlUpdateInfo]):
    """Receive safetensors buckets (file or bytes) and load them with the layerwise reload."""

    init_info_cls = RlctlInitInfo
    update_info_cls = RlctlUpdateInfo
    supports_draft_weight_update = False

    def __init__(
        self, config: Any, vllm_config: Any, device: torch.device, model: torch.nn.Module
    ) -> None:
        super().__init__(config, vllm_config, device, model)
        self.initialized = False
        # Parameter names (HF) the served checkpoint has: a name outside them would make
        # load_weights raise half-way through a layer and leave the model broken; refuse the
        # bucket before loading anything instead. None = not a local checkpoint, no check.
        self.known_names = checkpoint_names(str(self.model_config.model))
        self.stats = {"updates": 0, "buckets": 0, "tensors": 0, "bytes": 0, "last_update_s": 0.0}
        self._started_at = 0.0
        self._reloading = False  # the layerwise reload has begun in this update

    def init_transfer_engine(self, init_info: RlctlInitInfo) -> None:
        self.initialized = True

    def start_weight_update(self) -> None:
        if not self.initialized:
            raise RuntimeError(
                "rlctl_cpu: call /init_weight_transfer_engine before /start_weight_update"
            )
        # The layerwise reload begins with the first bucket, once its names are checked:
        # begun and abandoned, it leaves a model whose next generation fails (measured).
        self._started_at = time.perf_counter()
        self._reloading = False

    def update_weights(self, update_info: dict[str, Any]) -> None:
        # The base class synchronizes the accelerator after receive_weights; on CPU loading
        # is synchronous and there is no accelerator to wait for.
        self.receive_weights(self.parse_update_info(update_info))

    def receive_weights(self, update_info: RlctlUpdateInfo) -> None:
        if update_info.path is not None:
            if not os.path.isfile(update_info.path):
                raise FileNotFoundError(
                    f"rlctl_cpu: bucket file {update_info.path} does not exist on the server's "
                    "machine; the file transport needs a filesystem shared with the trainer"
                )
            tensors = load_file(update_info.path)
            size = os.path.getsize(update_info.path)
        else:
            raw = base64.b64decode(update_info.safetensors_b64 or "", validate=True)
            tensors = load_safetensors_bytes(raw)
            size = len(raw)
        self._check_names(update_info.all_names or [], tensors)
        if not self._reloading:
            from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

            initialize_layerwise_reload(self.model)
            self._reloading = True
        self.model.load_weights(list(tensors.items()))
        self.stats["buckets"] += 1
        self.stats["tensors"] += len(tensors)
        self.stats["bytes"] += size

    def _check_names(self, all_names: list[str], tensors: dict[str, torch.Tensor]) -> None:
        if self.known_names is None:
            return
        unknown = sorted((set(all_names) | set(tensors)) - self.known_names - _TIED_NAMES)
        if unknown:
            state = "partly updated" if self._reloading else "unchanged"
            raise ValueError(
                f"rlctl_cpu: {len(unknown)} tensor name(s) the served checkpoint does not have, "
                f"e.g. {unknown[:3]}; nothing of this bucket was loaded, the weights are {state}"
            )

    def finish_weight_update(self) -> None:
        if self._reloading:
            from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

            finalize_layerwise_reload(self.model, self.model_config)
            self._reloading = False
        self.stats["updates"] += 1
        self.stats["last_update_s"] = time.perf_counter() - self._started_at

    def shutdown(self) -> None:
        self.initialized = False


class RlctlWorkerExtension:
    """Mixed into vLLM's worker class (``--worker-extension-cls``); methods reachable by
    ``POST /collective_rpc {"method": ...}``. Importing this module registers the engine."""

    def rlctl_transfer_stats(self) -> str:
        """Counters of the rlctl_cpu engine in this worker (JSON), for tests and debugging."""
        engine = getattr(self, "weight_transfer_engine", None)
        stats = dict(engine.stats) if isinstance(engine, RlctlCPUTransferEngine) else {}
        stats["backend"] = type(engine).__name__ if engine is not None else None
        return json.dumps(stats)


def _register() -> None:
    # Imported once per worker process; a second import (a re-spawned worker) must not fail.
    if BACKEND not in WeightTransferEngineFactory._registry:
        WeightTransferEngineFactory.register_engine(BACKEND, RlctlCPUTransferEngine)


_register()
