"""String-matching rewards for tasks with one short verifiable answer."""

from __future__ import annotations

from pydantic import BaseModel

from rlctl.config.strict import STRICT_CONFIG
from rlctl.rewards.base import RewardInput


class DigitsMatchOptions(BaseModel):
    """Options of ``digits_match`` (none yet: the formula is fixed)."""

    model_config = STRICT_CONFIG


def digits_match(sample: RewardInput) -> dict[str, float]:
    """Partial credit: correct positions / max(target length, completion length).

    The completion is cut at the first eos (see :class:`RewardInput`); an empty completion
    scores 0. This is the reward measured in ``../shared/notes/tiny-task.md``: it rewards
    each right character and penalises every extra one, so stopping matters.
    """
    target, completion = sample.answer, sample.response_text
    if not completion:
        return {"score": 0.0, "exact": 0.0}
    correct = sum(1 for a, b in zip(target, completion, strict=False) if a == b)
    exact = float(completion == target)
    return {"score": correct / max(len(target), len(completion)), "exact": exact}


class ExactMatchOptions(BaseModel):
    """Options of ``exact_match``."""

    model_config = STRICT_CONFIG

    strip: bool = True
    """Ignore leading and trailing whitespace of the completion."""
    case_sensitive: bool = True
    """Compare letters case-sensitively."""


def exact_match(sample: RewardInput, *, strip: bool = True, case_sensitive: bool = True) -> float:
    """1.0 when the completion equals the answer, else 0.0."""
    got, want = sample.response_text, sample.answer
    if strip:
        got, want = got.strip(), want.strip()
    if not case_sensitive:
        got, want = got.lower(), want.lower()
    return float(got == want)
