"""Stopping a run whose scores, losses or gradient norm stopped being numbers.

A NaN or inf in a reward, an advantage, a loss or the gradient norm poisons the weights
(the optimizer steps on it), and a run that goes on trains nothing but still exits 0 and
exports the broken model. The step loop (:mod:`rlctl.run.entry`) calls :func:`check_finite`
once a step's metrics are logged (so the user sees them, NaNs written as ``null`` in
``metrics.jsonl``) and before that step's checkpoint is written: the run stops with exit 1
and one line naming the step and the first metric that went wrong, and the last checkpoint
on disk holds finite weights.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from rlctl.sinks.scalars import to_float

_REWARD = "a reward returned NaN or inf"
_ADVANTAGE = "the advantages are not finite (check the rewards and the estimator)"
_CRITIC = "the critic update diverged: lower algorithm.optim.lr or set its grad_clip"
_ACTOR = "the policy update diverged: lower algorithm.optim.lr or set its grad_clip"

WATCHED: tuple[tuple[str, str], ...] = (
    ("critic/score", _REWARD),
    ("critic/score/*", _REWARD),
    ("critic/rewards/*", _REWARD),
    ("critic/advantages/*", _ADVANTAGE),
    ("critic/returns/*", _ADVANTAGE),
    ("critic/values/*", _CRITIC),
    ("critic/*loss", _CRITIC),
    ("critic/grad_norm", _CRITIC),
    ("actor/*loss", _ACTOR),
    ("actor/grad_norm", _ACTOR),
)
"""The metrics a run must be able to trust, as ``fnmatch`` patterns with the likely cause,
in the order a step computes them (scores -> advantages -> critic update -> actor update):
the first that is not finite is the one named, what follows it is usually its consequence."""


class NonFiniteMetricError(RuntimeError):
    """A watched metric of a step is NaN or inf; the message names the step and metric."""

    def __init__(self, step: int, metric: str, value: float, others: list[str],
                 rewards: list[str] | None = None) -> None:
        """``rewards``: the rewards whose ``reward/<name>`` is not finite (named as the
        cause of a non-finite score)."""
        self.step, self.metric, self.value, self.others = step, metric, value, others
        also = ""
        if others:
            more = f" and {len(others) - 4} more" if len(others) > 4 else ""
            also = f" (also not finite: {', '.join(others[:4])}{more})"
        cause = WATCHED[_order(metric) or 0][1]
        if cause == _REWARD and rewards:
            cause = f"reward {', '.join(rewards)} returned NaN or inf"
        super().__init__(
            f"step {step}: {metric} is {value}{also}; the run stopped before saving this "
            f"step's weights (its metrics are logged). Likely cause: {cause}")


def _order(name: str) -> int | None:
    """Position of ``name`` in :data:`WATCHED`, ``None`` when it is not watched."""
    return next((i for i, (pattern, _) in enumerate(WATCHED) if fnmatchcase(name, pattern)),
                None)


def non_finite(metrics: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The watched metrics of ``metrics`` that are NaN or inf, in :data:`WATCHED` order
    (names in the order given within one pattern). ``None`` (not measured) is skipped."""
    found: list[tuple[int, str, float]] = []
    for name, raw in metrics.items():
        order = _order(str(name))
        value = to_float(raw) if order is not None else None
        if order is not None and value is not None and not math.isfinite(value):
            found.append((order, str(name), value))
    found.sort(key=lambda item: item[0])  # stable: ties keep the step's own order
    return [(name, value) for _, name, value in found]


def check_finite(step: int, metrics: Mapping[str, Any]) -> None:
    """Raise :class:`NonFiniteMetricError` when a watched metric of ``step`` is not finite."""
    bad = non_finite(metrics)
    if bad:
        (metric, value), rest = bad[0], [name for name, _ in bad[1:]]
        # reward/<name> is each reward's mean score (reward/<name>/<part> its components)
        rewards = [name.removeprefix("reward/") for name, raw in metrics.items()
                   if fnmatchcase(name, "reward/*") and name.count("/") == 1
                   and not math.isfinite(to_float(raw) or 0.0)]
        raise NonFiniteMetricError(step, metric, value, rest, rewards)
