"""A toy training loop built only from rlctl's checkpoint and sink building blocks.

Run as a script by test_resume_equivalence.py: ``python toy_resumable_trainer.py RUN_DIR
TOTAL_STEPS [--resume] [--crash-while-saving STEP]``. It uses every random source the real
trainer uses (Python ``random``, numpy, torch) so that an exact resume needs all of them.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
from pathlib import Path

import numpy as np
import torch

from rlctl.checkpoint import (
    CheckpointManager,
    TrainerState,
    capture_rng_state,
    check_resume_compatible,
    config_fingerprint,
    load_config_snapshot,
    restore_rng_state,
    save_config_snapshot,
)
from rlctl.sinks import MetricLogger
from rlctl.sinks.jsonl import make_jsonl_sink
from rlctl.sinks.options import JsonlSinkOptions

CONFIG = {"algorithm": {"lr": 0.05}, "schedule": {"save_every": 2}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("total_steps", type=int)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--crash-while-saving", type=int, default=-1)
    args = parser.parse_args()

    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=CONFIG["algorithm"]["lr"])
    manager = CheckpointManager(args.run_dir, keep_last=2, durable=False)
    start = 1
    if args.resume:
        ckpt = manager.resolve(None)
        check_resume_compatible(load_config_snapshot(ckpt), CONFIG)
        tensors = torch.load(ckpt / "model_optim.pt", weights_only=True)
        model.load_state_dict(tensors["model"])
        optimizer.load_state_dict(tensors["optimizer"])
        state = TrainerState.load(ckpt)
        restore_rng_state(state.rng)
        start = state.step + 1

    logger = MetricLogger({"jsonl": make_jsonl_sink(JsonlSinkOptions(), run_dir=args.run_dir)})
    for step in range(start, args.total_steps + 1):
        x = torch.randn(8, 4)  # [B, features]
        target = x.sum(dim=1, keepdim=True) + float(np.random.randn())  # [B, 1]
        loss = torch.nn.functional.mse_loss(model(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        logger.log(step, {"loss": loss.item(), "sampled": random.random()})
        if step % CONFIG["schedule"]["save_every"] == 0:
            tmp = manager.begin(step)
            torch.save(
                {"model": model.state_dict(), "optimizer": optimizer.state_dict()},
                tmp / "model_optim.pt",
            )
            if step == args.crash_while_saving:
                logger.close()  # flushes nothing new: the jsonl sink flushes every step
                os.kill(os.getpid(), signal.SIGKILL)
            save_config_snapshot(tmp, CONFIG)
            TrainerState(
                step=step, rng=capture_rng_state(), config_fingerprint=config_fingerprint(CONFIG)
            ).save(tmp)
            manager.commit(tmp, step)
    logger.close()


if __name__ == "__main__":
    main()
