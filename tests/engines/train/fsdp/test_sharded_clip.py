"""clip_sharded_grads (one all-reduce over local shards) against clip_grad_norm_ on DTensors."""

from __future__ import annotations

import torch
import torch.multiprocessing as mp

from rlctl.ports import free_port
from tests.engines.train.fsdp import clip_workers


def test_the_sharded_clip_gives_torchs_norm_and_clipped_gradients(tmp_path) -> None:
    out = tmp_path / "clip.pt"
    mp.spawn(clip_workers.worker, args=(free_port(), str(out)), nprocs=2, join=True)
    results = torch.load(out, weights_only=False)
    (norm_t, grads_t), (norm_r, grads_r) = results["torch"], results["rlctl"]
    assert norm_t > 10  # far above the 0.5 bound: the clip really scales
    assert abs(norm_r - norm_t) <= 1e-5 * norm_t
    for name, grad in grads_t.items():
        torch.testing.assert_close(grads_r[name], grad, atol=1e-7, rtol=1e-5)
    clipped = torch.sqrt(sum((g.double() ** 2).sum() for g in grads_r.values()))
    assert abs(float(clipped) - 0.5) < 1e-5
