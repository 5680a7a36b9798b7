"""Code that runs inside the spawned ranks of test_sharded_clip.py (imported by the children)."""

from __future__ import annotations

import os
import traceback

import torch

from tests.engines.gloo_teardown import leave_process_group


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: p.grad.full_tensor() for k, p in model.named_parameters()}


def _run(rank: int, port: int, out_path: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE="2", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    from rlctl.config.recipe import TinyModelSection
    from rlctl.engines.train.fsdp.full_weights import clip_sharded_grads
    from rlctl.models.tiny import build_tiny_model

    dist.init_process_group("gloo", rank=rank, world_size=2)
    results = {}
    for name in ("torch", "rlctl"):
        model = build_tiny_model(TinyModelSection(), seed=0)
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        ids = torch.randint(4, 30, (8, 10), generator=torch.Generator().manual_seed(rank))
        model(input_ids=ids).logits.pow(2).sum().backward()
        params = list(model.parameters())
        if name == "torch":
            norm = float(torch.nn.utils.clip_grad_norm_(params, 0.5, foreach=True).full_tensor())
        else:
            norm = clip_sharded_grads(params, 0.5, "cpu")
        results[name] = (norm, _grads(model))
    if rank == 0:
        torch.save(results, out_path)
    leave_process_group(ok=True)


def worker(rank: int, port: int, out_path: str) -> None:
    try:
        _run(rank, port, out_path)
    except BaseException:
        traceback.print_exc()
        raise
