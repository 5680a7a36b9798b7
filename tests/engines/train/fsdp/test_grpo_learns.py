"""The tiny model learns count_digits by GRPO through the real engines (slow)."""

from __future__ import annotations

import multiprocessing as mp

import pytest

STEPS = 80


def _learn(queue) -> None:  # a child process: FSDP's process group must not leak into pytest
    from tests.engines.train.fsdp.grpo_driver import run, tiny_recipe

    hist = run(tiny_recipe("count_digits", seed=0), steps=STEPS)
    queue.put(hist.reward)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_count_digits_reward_climbs():
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_learn, args=(queue,), daemon=True)
    proc.start()
    try:
        # ~25 s on an idle 2-core machine; minutes when other jobs share the cores.
        rewards = queue.get(timeout=1100)
    finally:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.terminate()
    first3, last10 = sum(rewards[:3]) / 3, sum(rewards[-10:]) / 10
    # Measured (seed 0): first-3 0.02; 10-step mean 0.61 at step 74, 0.70 at step 79.
    assert last10 >= 0.5, rewards
    assert last10 >= 3 * first3, rewards
