"""Built-in weight-sync methods (actor weights -> rollout engines)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, PositiveInt

from rlctl.config.strict import STRICT_CONFIG
from rlctl.engines.rollout.vllm.options import VLLMWeightSyncOptions
from rlctl.engines.rollout.weight_sync import InProcessOptions
from rlctl.hookspecs import hookimpl


class _Strict(BaseModel):
    model_config = STRICT_CONFIG


class SGLangWeightSyncOptions(_Strict):
    """Options of the ``sglang`` weight sync."""

    transport: Literal["disk", "tensor", "distributed"] = "tensor"
    """``/update_weights_from_disk``, ``..._from_tensor`` or ``..._from_distributed``."""
    bucket_mb: PositiveInt = 512
    """Tensors are sent in buckets of about this size (``tensor``, ``distributed``)."""
    flush_cache: bool = True
    """Flush the radix cache after the update (stale KV entries)."""
    timeout_s: float = Field(300.0, gt=0)
    """Seconds an update (and joining the ``distributed`` group) may take before it fails."""
    group_backend: Literal["auto", "gloo", "nccl"] = "auto"
    """``distributed``: process-group backend; ``auto`` = nccl on GPU, gloo on CPU."""
    master_address: str = "127.0.0.1"
    """``distributed``: address the servers use to reach this process (rank 0 of the group)."""
    staging_dir: str | None = None
    """``disk``: directory the servers read the safetensors file from; ``None`` = a temporary one."""


@hookimpl
def register_weight_syncs(register) -> None:  # type: ignore[no-untyped-def]
    register(
        "in_process",
        "rlctl.engines.rollout.weight_sync:InProcessWeightSync",
        options=InProcessOptions,
        description="copy the actor's exported weights into a rollout engine in the same process",
        engines=("hf",),
    )
    register(
        "vllm",
        "rlctl.engines.rollout.vllm.weight_sync:VLLMWeightSync",
        options=VLLMWeightSyncOptions,
        description="vLLM weight-transfer lifecycle: pause -> start -> update per bucket (file, "
        "http_bytes; nccl/ipc on CUDA) -> finish -> resume; or collective_rpc reload_weights",
        engines=("vllm",),
    )
    register(
        "sglang",
        "rlctl.engines.rollout.sglang.weight_sync:SGLangWeightSync",
        options=SGLangWeightSyncOptions,
        description="SGLang /update_weights_from_tensor | _distributed | _disk inside begin/end_weight_update",
        engines=("sglang",),
    )
