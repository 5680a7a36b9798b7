"""Without a critic the actor update computes the advantages itself, changing no number.

``[engines.train] advantage_pass = "auto"`` (the default) folds the advantage phase into the
actor update: the update's own read brings the estimator's inputs and its shard holds whole
groups, so the advantages are the ones the separate phase (``"always"``) computes, bit for
bit, and so is every metric. The Ray-mode twin on 2 FSDP ranks is in test_train_ray.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.trainer.metric_rows import deterministic


@pytest.mark.parametrize("patch", [
    {},
    # the KL penalty in the reward: the estimator's inputs include old and ref log-probs,
    # which earlier phases of the same step wrote
    {"algorithm": {"kl": {"in": "reward", "coef": 0.05}}},
    # a batch-whitened estimator and DAPO's overlong filter on the same shards
    {"algorithm": {"estimator": "reinforce_plus_plus_baseline", "overlong": {"filter": True}}},
], ids=["grpo", "kl-in-reward", "rpp-baseline-overlong"])
def test_the_update_computes_the_same_advantages_as_the_phase(make_recipe, run, patch):
    logging = {"logging": {"sinks": ["jsonl"], "progress": False, "rollout_dump_samples": 32}}
    inside = run(make_recipe(run={"name": "inside"}, **logging, **patch))
    engines = {"train": {"ranks": 1, "micro_batch_size": 16, "advantage_pass": "always"}}
    phase = run(make_recipe(run={"name": "phase"}, **logging, **dict(patch, engines=engines)))
    assert all("timing_s/adv" not in r for r in inside)  # no separate phase ran
    assert all("timing_s/adv" in r for r in phase)
    assert deterministic(inside) == deterministic(phase)
    assert "critic/advantages/mean" in inside[-1]
    out = make_recipe().run.output_dir
    for step in (1, 2, 3):  # the rollout dump reads the advantages the update wrote
        files = [Path(f"{out}/{name}/rollouts/step_{step}.jsonl") for name in ("inside", "phase")]
        dumps = [[{k: v for k, v in json.loads(x).items() if k != "key"}  # uids are random
                  for x in f.read_text().splitlines()] for f in files]
        assert dumps[0] == dumps[1] and len(dumps[0]) == 32  # every sample of the step
        if len({row["reward"] for row in dumps[0]}) > 1:  # some group's rewards differ
            assert any(row["advantage"] != 0.0 for row in dumps[0])


def test_a_critic_keeps_the_phase(make_recipe, run):
    """PPO with GAE: the critic's update reads the returns, so the phase stays."""
    rows = run(make_recipe(algorithm={"estimator": "gae", "group_size": 2},
                           critic={"enabled": True}, schedule={"total_steps": 2}))
    assert all("timing_s/adv" in r for r in rows)
