"""How a training engine reduces the loss function's metrics over a minibatch's micro-batches.

A loss function (``LossFn`` in :mod:`rlctl.engines.train.contract`) reports two kinds of
metric per micro-batch:

* a **scalar** (float or 0-d tensor, e.g. the micro-batch's share of the policy loss): the
  engine reports its mean over the real micro-batches;
* a **token statistic**, ``(sum, count, min, max)`` over the micro-batch's tokens (see
  :func:`token_stat`): the engine merges them exactly (sums add, extremes extend), so the
  mean the trainer shows is over every token of the minibatch, on every rank, however the
  tokens were split into micro-batches (entropy, rollout-vs-trainer probability gap).

Passes that only keep collectives aligned are not reported (their caller skips them).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

TokenStat = tuple[float, float, float, float]  # sum, count, min, max


def token_stat(values: Any, mask: Any) -> TokenStat:
    """``(sum, count, min, max)`` of ``values`` where ``mask`` is set (tensors of one shape)."""
    picked = values.detach()[mask.bool()].double()
    if picked.numel() == 0:
        return (0.0, 0.0, math.inf, -math.inf)
    return (float(picked.sum()), float(picked.numel()), float(picked.min()), float(picked.max()))


def plain(value: Any) -> float | TokenStat:
    """A reported metric as plain floats: a tensor's value, or a token statistic's four."""
    if isinstance(value, tuple):
        return tuple(float(v) for v in value)  # type: ignore[return-value]
    return float(value.detach() if hasattr(value, "detach") else value)


def reduce_micro_batches(reported: Iterable[Mapping[str, Any]]) -> dict[str, float | TokenStat]:
    """One minibatch's metrics from its real micro-batches' (see the module docstring)."""
    sums: dict[str, float] = {}
    stats: dict[str, TokenStat] = {}
    passes = 0
    for metrics in reported:
        passes += 1
        for key, value in metrics.items():
            value = plain(value)
            if isinstance(value, tuple):
                s0, c0, lo0, hi0 = stats.get(key, (0.0, 0.0, math.inf, -math.inf))
                s, c, lo, hi = value
                stats[key] = (s0 + s, c0 + c, min(lo0, lo), max(hi0, hi))
            else:
                sums[key] = sums.get(key, 0.0) + value
    out: dict[str, float | TokenStat] = {k: v / max(passes, 1) for k, v in sums.items()}
    out.update(stats)
    return out
