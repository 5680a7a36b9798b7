"""DAPO's soft overlong punishment (``[algorithm.overlong]``), as verl's DAPO reward manager.

A response of ``length`` tokens (eos included when the model stopped) that runs into the
last ``buffer_len`` tokens before ``max_tokens`` loses reward linearly::

    penalty = min(-(length - (max_tokens - buffer_len)) / buffer_len * penalty_factor, 0)

so 0 up to ``max_tokens - buffer_len`` and ``-penalty_factor`` at ``max_tokens``. The
penalty is added to the sample's score before anything reads it (the advantage, the dynamic
sampling filter), like verl's ``reward += overlong_reward``. Pure Python: rollout workers
call it per sample.
"""

from __future__ import annotations


def overlong_penalty(
    length: int, *, max_tokens: int, buffer_len: int, penalty_factor: float
) -> float:
    """The (non-positive) reward added to a response of ``length`` tokens; 0 when off."""
    if buffer_len <= 0:
        return 0.0
    expected = max_tokens - buffer_len
    return min(-(length - expected) / buffer_len * penalty_factor, 0.0)
