"""Shaping terms added to a task reward (combine them with ``[[rewards]] weight``)."""

from __future__ import annotations

from pydantic import BaseModel, Field, PositiveInt

from rlctl.config.strict import STRICT_CONFIG
from rlctl.rewards.base import RewardInput


class LengthPenaltyOptions(BaseModel):
    """Options of ``length_penalty``."""

    model_config = STRICT_CONFIG

    target_tokens: int = Field(0, ge=0)
    """Responses up to this many tokens are not penalised."""
    max_tokens: PositiveInt = 256
    """Length at which the penalty reaches -1 (usually ``[rollout] max_new_tokens``)."""
    truncated_penalty: float = Field(0.0, ge=0)
    """Extra penalty when the response hit the length limit without an eos."""


def length_penalty(
    sample: RewardInput,
    *,
    target_tokens: int = 0,
    max_tokens: int = 256,
    truncated_penalty: float = 0.0,
) -> float:
    """``-(len - target) / (max - target)`` clipped to [-1, 0], minus the truncation penalty."""
    length = len(sample.response_ids)
    span = max(max_tokens - target_tokens, 1)
    over = max(length - target_tokens, 0)
    penalty = -min(over / span, 1.0)
    if sample.finish_reason == "length":
        penalty -= truncated_penalty
    return penalty
