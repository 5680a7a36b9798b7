"""Learning-rate schedule from [algorithm.optim]."""

from __future__ import annotations

import pytest
import torch

from rlctl.config.recipe import OptimSection
from rlctl.engines.train.lr_schedule import build_optimizer, build_scheduler, lr_factor


@pytest.mark.parametrize(
    ("optim", "expected"),
    [
        (OptimSection(), [1.0, 1.0, 1.0, 1.0]),
        (OptimSection(warmup_steps=2), [0.5, 1.0, 1.0, 1.0]),
        (OptimSection(scheduler="linear", min_lr_ratio=0.5), [1.0, 0.875, 0.75, 0.625]),
        (OptimSection(scheduler="cosine", warmup_steps=1), [1.0, 1.0, 0.5, 0.0]),
    ],
)
def test_lr_factor(optim, expected):
    assert [
        lr_factor(s, optim, total_steps=4 if optim.warmup_steps == 0 else 3) for s in range(4)
    ] == pytest.approx(expected)


def test_scheduler_drives_the_optimizer():
    optim = OptimSection(name="adamw", lr=0.1, warmup_steps=2)
    opt = build_optimizer([torch.nn.Parameter(torch.zeros(2))], optim)
    sched = build_scheduler(opt, optim, total_steps=10)
    seen = []
    for _ in range(3):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.05, 0.1, 0.1])
    assert isinstance(
        build_optimizer([torch.nn.Parameter(torch.zeros(1))], OptimSection(name="sgd")),
        torch.optim.SGD,
    )
