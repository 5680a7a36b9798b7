"""GSM8K-style reward: the final number of the answer against the ground truth.

Like verl's ``gsm8k`` scorer: ``strict`` takes the number after ``####``; ``flexible``
takes the last number in the completion. Commas and ``$`` are ignored.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from rlctl.config.strict import STRICT_CONFIG
from rlctl.rewards.base import RewardInput

_STRICT = re.compile(r"####\s*(-?[$0-9.,]+)")
_NUMBER = re.compile(r"-?[$0-9.,]*[0-9]+")


class Gsm8kOptions(BaseModel):
    """Options of ``gsm8k``."""

    model_config = STRICT_CONFIG

    method: Literal["strict", "flexible"] = "strict"
    """``strict``: the number after ``####``; ``flexible``: the last number."""
    format_score: float = Field(0.0, ge=0, le=1)
    """Score of a well-formed but wrong answer."""
    score: float = Field(1.0, gt=0)
    """Score of a right answer."""


def _normalise(number: str) -> str:
    cleaned = number.replace(",", "").replace("$", "").rstrip(".")
    try:
        value = float(cleaned)
    except ValueError:
        return cleaned
    return str(int(value)) if value.is_integer() else repr(value)


def extract_answer(text: str, method: str = "strict") -> str | None:
    """The answer number in ``text``, or None when there is none."""
    if method == "strict":
        found = _STRICT.findall(text)
        return _normalise(found[-1]) if found else None
    found = [n for n in _NUMBER.findall(text) if n.strip("$.,-")]
    return _normalise(found[-1]) if found else None


def gsm8k(
    sample: RewardInput,
    *,
    method: str = "strict",
    format_score: float = 0.0,
    score: float = 1.0,
) -> dict[str, float]:
    """``score`` for the right final number, ``format_score`` for a wrong one, 0 for none."""
    got = extract_answer(sample.response_text, method)
    if got is None:
        return {"score": 0.0, "formatted": 0.0}
    want = _normalise(sample.answer.split("####")[-1].strip())
    return {"score": score if got == want else format_score, "formatted": 1.0}
