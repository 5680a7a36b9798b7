"""Megatron-core parallel state for the ``megatron`` engine: groups, RNG, gradient norm."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist
from megatron.core import parallel_state as mpu
from megatron.core import tensor_parallel
from megatron.core.tensor_parallel import param_is_not_tensor_parallel_duplicate
from megatron.core.transformer.module import param_is_not_shared

from rlctl.engines.train.megatron.options import MegatronOptions


def init_model_parallel(options: MegatronOptions, world_size: int, seed: int,
                        device: str = "cpu") -> None:
    """Create Megatron's TP / PP / DP groups once per process (engines of one process share
    them, so a second engine must ask for the same layout)."""
    if device == "cpu" and options.virtual_pipeline_parallel and options.pipeline_parallel == 2:
        # Measured: with 2 stages the previous and next stage are the same peer, and gloo
        # pairs the interleaved schedule's simultaneous sends/receives wrongly (wrong loss).
        # PP=4 x VPP=2 on gloo matches 1 rank exactly (tests/engines/train/megatron).
        raise ValueError(
            "virtual_pipeline_parallel with pipeline_parallel = 2 is not supported on CPU "
            "(gloo): use pipeline_parallel >= 3, or drop virtual_pipeline_parallel")
    if world_size % options.model_parallel_size:
        raise ValueError(
            f"{world_size} training ranks cannot hold tensor_parallel x pipeline_parallel x "
            f"context_parallel = {options.model_parallel_size} ranks per model copy: make the "
            "training world size a multiple of it ([engines.train.options])")
    want = (options.tensor_parallel, options.pipeline_parallel,
            options.virtual_pipeline_parallel)
    if mpu.model_parallel_is_initialized():
        have = (mpu.get_tensor_model_parallel_world_size(),
                mpu.get_pipeline_model_parallel_world_size(),
                mpu.get_virtual_pipeline_model_parallel_world_size())
        if have != want:
            raise RuntimeError(
                f"Megatron parallel state already exists with TP/PP/VPP={have} but this engine "
                f"wants {want}: all engines of one process must share one layout")
        return
    mpu.initialize_model_parallel(
        tensor_model_parallel_size=options.tensor_parallel,
        pipeline_model_parallel_size=options.pipeline_parallel,
        virtual_pipeline_model_parallel_size=options.virtual_pipeline_parallel,
        context_parallel_size=options.context_parallel,
        expert_model_parallel_size=options.expert_parallel,
    )
    # The TP RNG tracker: attention code forks it even with dropout 0.
    try:
        tensor_parallel.model_parallel_cuda_manual_seed(seed)
    except (AssertionError, RuntimeError) as exc:
        if torch.cuda.is_available():
            raise
        raise RuntimeError(
            "megatron-core hard-codes CUDA calls and this machine has no GPU; on CPU it only "
            "runs through the test shim: PYTHONPATH=tests/engines/train/megatron/shim rlctl train "
            "... (see docs/megatron.md)") from exc


def unwrap(chunk: Any) -> Any:
    """The GPTModel inside a DDP wrapper (or the chunk itself)."""
    return getattr(chunk, "module", chunk)


def grad_norm(params: list[torch.nn.Parameter]) -> float:
    """Global L2 norm of ``.grad`` over the whole model: each TP-replicated or PP-shared
    tensor counted once, summed over the model-parallel (TP x PP) group. DP replicas hold
    identical reduced gradients, so they are not summed."""
    device = params[0].device if params else torch.device("cpu")
    total = torch.zeros((), dtype=torch.float64, device=device)
    for p in params:
        if p.grad is not None and param_is_not_shared(p) and (
                param_is_not_tensor_parallel_duplicate(p)):
            total += p.grad.detach().double().pow(2).sum()
    if dist.is_initialized():
        dist.all_reduce(total, group=mpu.get_model_parallel_group())
    return math.sqrt(float(total))
