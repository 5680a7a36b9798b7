"""The old log-prob forward is skipped exactly when the update gives them: one epoch, one minibatch.

Tolerance of the same-seed comparison (skipped vs run): every metric is identical except
``training/rollout_probs_diff``, whose mean is summed in another order (in the update's
micro-batches instead of the old pass's one list): relative 1e-9. With the old pass cut into
the update's micro-batches (``log_prob_micro_batch_size == micro_batch_size``, as in
recipes/tiny_grpo.toml) the update's forward is the same computation (same weights, rows and
shapes), so its detached log-probs equal the pass's bit for bit and the ratio, loss and
gradient do not change. With other shapes the pass's log-probs differ from the update's by
float rounding (ratio 1 +- 1e-8); skipping it makes the ratio exactly 1.
"""

from __future__ import annotations

import math

import pytest

from rlctl.algorithms.staleness import policy_of
from rlctl.config.pipeline import validate_recipe
from rlctl.registry import get_registry
from rlctl.trainer.plan import build_plan
from tests.trainer.metric_rows import deterministic

REL_TOL = 1e-9
REORDERED = {"training/rollout_probs_diff"}  # summed in another order: REL_TOL


# Streaming (k = 1; --local generates step t + 1 before step t trains, so every trained sample
# is one update old) with its default correction, decoupled PPO: the update's forward runs on
# the proximal weights, so its detached log-probs are the pass's and the correction's weights
# pi_prox / pi_behav do not change either.
STREAMING = {"staleness": {"policy": "bounded", "options": {"max_staleness": 1}}}


@pytest.mark.parametrize("algorithm", [{}, STREAMING], ids=["on_policy", "streaming"])
def test_one_epoch_one_minibatch_skips_the_pass_and_changes_no_number(make_recipe, run,
                                                                        algorithm):
    # micro_batch_size 16 of 32 samples: two micro-batches, so the token statistics are
    # merged across passes (the case the reordered sums come from).
    train = {"train": {"micro_batch_size": 16, "log_prob_micro_batch_size": 16}}
    skipped = run(make_recipe(run={"name": "auto"}, engines=train, algorithm=algorithm))
    forward = run(make_recipe(run={"name": "always"}, algorithm=algorithm,
                              engines={"train": {**train["train"], "old_log_prob_pass": "always"}}))
    assert all("timing_s/old_log_prob" not in r for r in skipped)  # the phase never ran
    assert all("timing_s/old_log_prob" in r for r in forward)
    a, b = deterministic(skipped), deterministic(forward)
    assert [sorted(r) for r in a] == [sorted(r) for r in b]  # the same metrics, rollout gap too
    for step, (x, y) in enumerate(zip(a, b, strict=True), start=1):
        for key in x:
            if key in REORDERED:
                assert math.isclose(x[key], y[key], rel_tol=REL_TOL), (step, key, x[key], y[key])
            else:
                assert x[key] == y[key], (step, key, x[key], y[key])
    assert skipped[0]["actor/ppo_kl"] == 0.0 and skipped[0]["actor/pg_clipfrac"] == 0.0
    if algorithm:  # the samples really were stale and the correction weighed them
        assert all(r["streaming/staleness_mean"] == 1.0 for r in skipped[1:])
        assert "actor/is_weight_mean" in skipped[-1]


def test_entropy_is_the_per_token_mean_however_the_tokens_are_split(make_recipe, run):
    """``actor/entropy`` comes from the update's forward as a token statistic: one or two
    micro-batches give the same mean (it was each micro-batch's share, averaged: half)."""
    one = run(make_recipe(run={"name": "one"}, engines={"train": {"micro_batch_size": 32}},
                          schedule={"total_steps": 1}))
    two = run(make_recipe(run={"name": "two"}, schedule={"total_steps": 1}))
    assert math.isclose(one[0]["actor/entropy"], two[0]["actor/entropy"], rel_tol=1e-5)
    # a random-init model is near uniform over the 32-token vocabulary: about ln 32
    assert 0.9 * math.log(32) < two[0]["actor/entropy"] <= math.log(32)


def old_log_probs(recipe):
    """The plan's choice for ``recipe``: ``(value, why)``."""
    loaded = validate_recipe(recipe)
    choice = build_plan(loaded, get_registry(), policy_of(loaded)).old_log_probs
    return choice.value, choice.why


@pytest.mark.parametrize(
    ("patch", "reason"),
    [
        ({"engines": {"train": {"old_log_prob_pass": "always"}}}, 'old_log_prob_pass = "always"'),
        ({"algorithm": {"epochs": 2}}, "2 epoch(s) x 1 minibatch(es)"),
        ({"algorithm": {"minibatches": 2}}, "1 epoch(s) x 2 minibatch(es)"),
        ({"algorithm": {"kl": {"in": "reward"}}}, "KL penalty in the reward"),
        ({"algorithm": {"estimator": "optimal_token_baseline"}},
         "'optimal_token_baseline' estimator reads them"),
    ],
)
def test_what_reads_them_before_the_update_keeps_the_pass(make_recipe, patch, reason):
    assert old_log_probs(make_recipe())[0] == "update"
    value, why = old_log_probs(make_recipe(**patch))
    assert value == "pass" and reason in why, why


@pytest.mark.parametrize("algorithm", [
    STREAMING, {"correction": {"method": "truncated_is"}},
    {"correction": {"method": "masked_is"}}], ids=["streaming", "truncated_is", "masked_is"])
def test_stale_samples_and_corrections_take_them_from_the_update(make_recipe, algorithm):
    """The old log-probs are the proximal policy's (the step's weights), not the behaviour
    policy's: one epoch and one minibatch give them from the update, stale samples or not."""
    value, why = old_log_probs(make_recipe(algorithm=algorithm))
    assert value == "update" and "one epoch, one minibatch" in why
