"""Built-in weight-sync methods (actor weights -> rollout engines)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from rlctl.engines.weight_sync import InProcessOptions
from rlctl.hookspecs import hookimpl


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class VLLMWeightSyncOptions(_Strict):
    """Options of the ``vllm`` weight sync (vLLM's weight-transfer lifecycle)."""

    transport: Literal["file", "http_bytes", "nccl", "ipc"] = "file"
    """How tensors travel: a safetensors file (implemented), bytes over HTTP, NCCL or CUDA IPC (not yet)."""
    bucket_mb: PositiveInt = 512
    """Tensors are sent in buckets of about this size."""
    pause_mode: Literal["abort", "wait", "keep"] = "wait"
    """What running requests do while weights change (vLLM ``/pause?mode=``)."""
    staging_dir: str | None = None
    """Directory for ``file`` transport; defaults to the run directory."""


class SGLangWeightSyncOptions(_Strict):
    """Options of the ``sglang`` weight sync."""

    transport: Literal["disk", "tensor", "distributed"] = "tensor"
    """``/update_weights_from_disk``, ``..._from_tensor`` or ``..._from_distributed``."""
    bucket_mb: PositiveInt = 512
    """Tensors are sent in buckets of about this size."""
    flush_cache: bool = True
    """Flush the radix cache after the update (stale KV entries)."""
    timeout_s: float = Field(300.0, gt=0)
    """Seconds an update may take before it fails."""


@hookimpl
def register_weight_syncs(register) -> None:  # type: ignore[no-untyped-def]
    register(
        "in_process",
        "rlctl.engines.weight_sync:InProcessWeightSync",
        options=InProcessOptions,
        description="copy the actor's exported weights into a rollout engine in the same process",
        engines=("hf",),
    )
    register(
        "vllm",
        "rlctl.engines.weight_sync:EngineReloadWeightSync",
        options=VLLMWeightSyncOptions,
        description="vLLM pause -> reload_weights from a safetensors file -> resume (file transport)",
        engines=("vllm",),
    )
    register(
        "sglang",
        None,
        options=SGLangWeightSyncOptions,
        description="SGLang update_weights_from_* endpoints - not implemented yet",
        engines=("sglang",),
    )
