"""Built-in model (training) engines: ``fsdp`` (FSDP2) and ``megatron`` (not yet)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, PositiveInt

from rlctl.engines.fsdp_options import FSDPOptions
from rlctl.hookspecs import hookimpl


class MegatronOptions(BaseModel):
    """Parallelism of the ``megatron`` engine (Megatron-core)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    tensor_parallel: PositiveInt = 1
    """Tensor-parallel size (TP)."""
    pipeline_parallel: PositiveInt = 1
    """Pipeline-parallel size (PP)."""
    virtual_pipeline_parallel: PositiveInt | None = None
    """Interleaved pipeline stages per rank; ``None`` = no interleaving."""
    context_parallel: PositiveInt = 1
    """Context-parallel size (CP) for long sequences."""
    expert_parallel: PositiveInt = 1
    """Expert-parallel size (EP) for MoE models."""
    sequence_parallel: bool = False
    """Shard layer norms and dropout along the sequence (needs TP > 1)."""
    use_distributed_optimizer: bool = True
    """Shard optimizer state across data-parallel ranks."""
    recompute_granularity: str | None = None
    """Activation recomputation: ``full``, ``selective`` or ``None``."""


@hookimpl
def register_model_engines(register) -> None:  # type: ignore[no-untyped-def]
    register(
        "fsdp",
        "rlctl.engines.fsdp_engine:FSDPEngine",
        options=FSDPOptions,
        description="torch FSDP2 (fully_shard): gloo on CPU, NCCL on GPU; actor, ref and critic",
    )
    register(
        "megatron",
        None,
        options=MegatronOptions,
        description="Megatron-core TP/PP/CP/EP - not implemented yet",
    )
