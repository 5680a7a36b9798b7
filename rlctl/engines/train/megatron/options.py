"""Options of the ``megatron`` training engine (``[engines.train.options]``); no torch import."""

from __future__ import annotations

from typing import Literal

from pydantic import PositiveInt, model_validator

from rlctl.config.strict import TrainEngineOptions


class MegatronOptions(TrainEngineOptions):
    """Parallel layout and kernels of the ``megatron`` engine (Megatron-core)."""

    tensor_parallel: PositiveInt = 1
    """Tensor-parallel size (TP); must divide the KV-head count."""
    pipeline_parallel: PositiveInt = 1
    """Pipeline-parallel size (PP); must divide the layer count (times VPP)."""
    virtual_pipeline_parallel: PositiveInt | None = None
    """Interleaved pipeline stages per rank (VPP, needs PP > 1); ``None`` = no interleaving."""
    context_parallel: PositiveInt = 1
    """Context-parallel size (CP); only 1 is supported by this engine so far."""
    expert_parallel: PositiveInt = 1
    """Expert-parallel size (EP); only 1 (dense models) is supported so far."""
    sequence_parallel: bool = False
    """Shard norms and dropout along the sequence in TP regions (TP > 1, Transformer Engine)."""
    use_distributed_optimizer: bool = False
    """Shard optimizer state over data-parallel ranks (not supported yet: keep ``false``)."""
    recompute_granularity: Literal["full", "selective"] | None = None
    """Activation recomputation: ``full`` (whole layers), ``selective`` (attention core)."""
    transformer_impl: Literal["local", "transformer_engine"] = "local"
    """Layer implementation: ``local`` (pure megatron-core) or ``transformer_engine`` (GPU)."""

    @model_validator(mode="after")
    def _supported(self) -> MegatronOptions:
        where = "[engines.train.options] of the megatron engine"
        if self.context_parallel != 1:
            raise ValueError(f"{where}: context_parallel > 1 is not supported yet; set it to 1")
        if self.expert_parallel != 1:
            raise ValueError(
                f"{where}: expert_parallel > 1 needs an MoE model; the engine converts dense "
                "Qwen3/Qwen2/Llama checkpoints only: set it to 1"
            )
        if self.sequence_parallel and self.tensor_parallel == 1:
            raise ValueError(f"{where}: sequence_parallel needs tensor_parallel > 1")
        if self.sequence_parallel and self.transformer_impl != "transformer_engine":
            raise ValueError(
                f"{where}: sequence_parallel needs transformer_impl = \"transformer_engine\" "
                "(megatron-core's local layers use torch norms, which it refuses to run "
                "sequence-parallel)")
        if self.virtual_pipeline_parallel is not None and self.pipeline_parallel == 1:
            raise ValueError(f"{where}: virtual_pipeline_parallel needs pipeline_parallel > 1")
        if self.use_distributed_optimizer:
            raise ValueError(
                f"{where}: use_distributed_optimizer is not supported yet (Megatron's optimizer "
                "is not wired in; the engine uses torch.optim over DDP-reduced gradients): "
                "set it to false"
            )
        return self

    @property
    def model_parallel_size(self) -> int:
        """Ranks that hold one copy of the model (TP x PP x CP)."""
        return self.tensor_parallel * self.pipeline_parallel * self.context_parallel
