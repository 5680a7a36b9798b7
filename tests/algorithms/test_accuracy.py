"""pass@1, mean@k, pass@k and their intervals (the math ``rlctl eval`` and validation share)."""

from __future__ import annotations

import math

import pytest

from rlctl.algorithms.accuracy import (
    accuracy_metrics,
    accuracy_partials,
    group_scores,
    mean_interval,
    pass_at_k,
    wilson_interval,
)
from rlctl.trainer import metric_reduce as mr


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(4, 0, 1) == 0.0 and pass_at_k(4, 4, 4) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(4, 2))  # 0.5
    assert pass_at_k(5, 2, 4) == 1.0  # fewer wrong than k: a correct one is always drawn
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)


def test_wilson_interval_matches_the_textbook_values() -> None:
    low, high = wilson_interval(0, 10)
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(9, 64)  # 14.1%: the base model's greedy accuracy here
    assert (low, high) == (pytest.approx(0.0757, abs=1e-4), pytest.approx(0.2462, abs=1e-4))


def test_the_normal_interval_of_fractions() -> None:
    values = [0.25, 0.5, 0.75, 1.0]
    low, high = mean_interval(sum(values), sum(v * v for v in values), len(values))
    sd = math.sqrt(sum((v - 0.625) ** 2 for v in values) / 3)
    assert (low + high) / 2 == pytest.approx(0.625)
    assert high - 0.625 == pytest.approx(1.959964 * sd / 2, rel=1e-5)


def test_greedy_responses_give_pass_at_1_with_a_wilson_interval() -> None:
    groups = group_scores(["a", "b", "c", "d"], [1.0, 0.0, 1.0, 0.5])
    metrics = accuracy_metrics(accuracy_partials(groups, correct_score=1.0, greedy=True))
    assert metrics["pass@1"] == 0.5 and metrics["prompts"] == 4
    assert (metrics["pass@1/ci_low"], metrics["pass@1/ci_high"]) == pytest.approx(
        wilson_interval(2, 4))


def test_k_samples_give_mean_at_k_and_pass_at_k_merged_exactly_across_workers() -> None:
    uids = ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    scores = [1, 0, 0, 0] + [0, 0, 0, 0] + [1, 1, 1, 0.9]
    whole = accuracy_metrics(accuracy_partials(group_scores(uids, scores), correct_score=1.0,
                                               greedy=False))
    assert whole["mean@4"] == pytest.approx((0.25 + 0 + 0.75) / 3)
    assert whole["pass@4"] == pytest.approx(2 / 3)
    # two workers, each with whole groups: merged partials give the same numbers
    parts = [accuracy_partials(group_scores(uids[:4], scores[:4]), correct_score=1.0,
                               greedy=False),
             accuracy_partials(group_scores(uids[4:], scores[4:]), correct_score=1.0,
                               greedy=False)]
    assert accuracy_metrics(mr.merge(parts)) == pytest.approx(whole)


def test_the_threshold_decides_what_counts_as_correct() -> None:
    groups = group_scores(["a", "b"], [0.9, 0.4])
    assert accuracy_metrics(accuracy_partials(groups, correct_score=0.5, greedy=True))[
        "pass@1"] == 0.5


def test_uneven_groups_are_an_error_not_a_bias() -> None:
    with pytest.raises(ValueError, match="same number of responses"):
        accuracy_partials(group_scores(["a", "a", "b"], [1, 1, 1]), correct_score=1.0,
                          greedy=False)
