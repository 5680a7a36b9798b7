"""Accuracy on held-out prompts: pass@1, mean@k, pass@k, with confidence intervals.

A response is *correct* when its score is at least the threshold (``[rollout]
val_correct_score``, 1.0 by default: a verifier's full marks). With ``n`` responses per
prompt, ``c`` of them correct:

* ``mean@n`` = the mean over prompts of ``c / n`` (the sampled pass@1 estimate); with one
  greedy response per prompt it is the greedy accuracy, reported as ``pass@1``;
* ``pass@k`` = the mean over prompts of ``1 - C(n - c, k) / C(n, k)``, the unbiased estimator
  of "at least one of k responses is correct" (Chen et al. 2021, the HumanEval paper); here
  ``k = n``, so it is the share of prompts with at least one correct response.

Intervals (95%): Wilson's score interval when every prompt's value is 0 or 1 (pass@1 greedy,
pass@k with k = n), which stays inside [0, 1] and is sound near 0 and 1 where a normal
interval is not; otherwise the normal interval of the mean over prompts (clipped to [0, 1]).

Workers reduce what they hold to partials (``sum, count, min, max``, and the sum of squares
under ``<name>/sq``) with :func:`accuracy_partials`; :func:`accuracy_metrics` turns the merged
partials into the numbers, so ``rlctl eval`` and validation during training compute them one
way. No torch here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import NormalDist

Partial = tuple[float, float, float, float]  # sum, count, min, max (rlctl.trainer.metric_reduce)
CONFIDENCE = 0.95
SQUARES = "/sq"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` responses of which ``c`` are correct (``k <= n``)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _partial(values: Sequence[float]) -> Partial:
    if not values:
        return (0.0, 0.0, math.inf, -math.inf)
    return (float(sum(values)), float(len(values)), float(min(values)), float(max(values)))


def metric_names(n: int, greedy: bool) -> tuple[str, str]:
    """The two metrics of a pass with ``n`` responses per prompt: ``(mean name, pass name)``;
    one greedy response is ``pass@1`` alone (both names)."""
    if n == 1:
        return ("pass@1", "pass@1") if greedy else ("mean@1", "mean@1")
    return f"mean@{n}", f"pass@{n}"


def accuracy_partials(
    groups: Mapping[str, Sequence[float]], *, correct_score: float, greedy: bool
) -> dict[str, Partial]:
    """Partials of the accuracy metrics over ``groups`` (prompt id -> its responses' scores).

    Every prompt must have the same number of responses ``n`` (a validation pass asks for the
    same count of each); a group of another size is an error, not a silent bias.
    """
    sizes = {len(s) for s in groups.values()}
    if not groups:
        return {}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"every prompt needs the same number of responses, got sizes {sizes}")
    n = sizes.pop()
    mean_name, pass_name = metric_names(n, greedy)
    means, passes = [], []
    for scores in groups.values():
        c = sum(1 for s in scores if s >= correct_score)
        means.append(c / n)
        passes.append(pass_at_k(n, c, n))
    out = {mean_name: _partial(means), mean_name + SQUARES: _partial([v * v for v in means])}
    if pass_name != mean_name:
        out[pass_name] = _partial(passes)
        out[pass_name + SQUARES] = _partial([v * v for v in passes])
    return out


def wilson_interval(successes: float, total: float, confidence: float = CONFIDENCE
                    ) -> tuple[float, float]:
    """Wilson score interval of a proportion."""
    if total <= 0:
        return (0.0, 1.0)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return (max(0.0, centre - half), min(1.0, centre + half))


def mean_interval(total: float, squares: float, count: float, confidence: float = CONFIDENCE
                  ) -> tuple[float, float]:
    """Normal interval of a mean from its sum, sum of squares and count (clipped to [0, 1])."""
    if count <= 1:
        return (0.0, 1.0)
    mean = total / count
    variance = max(squares - count * mean * mean, 0.0) / (count - 1)  # sample variance
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    half = z * math.sqrt(variance / count)
    return (max(0.0, mean - half), min(1.0, mean + half))


def accuracy_metrics(merged: Mapping[str, Partial]) -> dict[str, float]:
    """``name``, ``name/ci_low``, ``name/ci_high`` for every accuracy metric in ``merged``
    (merged :func:`accuracy_partials` of every worker), plus ``prompts``."""
    out: dict[str, float] = {}
    for name, (total, count, lo, hi) in merged.items():
        if name.endswith(SQUARES) or count <= 0:
            continue
        squares = merged.get(name + SQUARES, (total, count, lo, hi))[0]
        binary = squares == total  # every value 0 or 1 (x*x == x only there, for x in [0,1])
        low, high = (wilson_interval(total, count) if binary
                     else mean_interval(total, squares, count))
        out[name] = total / count
        out[f"{name}/ci_low"] = low
        out[f"{name}/ci_high"] = high
        out["prompts"] = count
    return out


def group_scores(uids: Iterable[str], scores: Iterable[float]) -> dict[str, list[float]]:
    """Scores grouped by prompt id, in first-seen order."""
    groups: dict[str, list[float]] = {}
    for uid, score in zip(uids, scores, strict=True):
        groups.setdefault(uid, []).append(float(score))
    return groups
