"""The ``numeric_closeness`` reward: pure Python, runs inside rollout workers."""

from __future__ import annotations

import re
from typing import Any

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def numeric_closeness(
    sample: Any, *, tolerance: float = 2.0, missing_score: float = 0.0
) -> dict[str, float]:
    """Score = max(0, 1 - |x - answer| / tolerance) for the first number x in the response.

    ``sample`` is an :class:`rlctl.rewards.base.RewardInput`. Returns ``score`` plus a
    ``parsed`` component (1 when the response held a number) that rlctl logs as a metric.
    """
    match = _NUMBER.search(sample.response_text)
    if match is None:
        return {"score": float(missing_score), "parsed": 0.0}
    distance = abs(float(match.group()) - float(sample.answer))
    return {"score": max(0.0, 1.0 - distance / tolerance), "parsed": 1.0}
