"""``reasoning_gym``: a reasoning-gym task's own verifier as a reward.

The prompt's ground truth (written by the ``reasoning_gym`` task) carries the generator's name
and the item; the answer is taken out of the completion (:func:`extract_answer`) and scored by
the generator's ``score_answer`` (1.0 right; some generators give partial credit, e.g. a
longer string that contains the answer).

How the answer is found (``extract``):

* ``auto`` (default): the text of the last ``<answer>...</answer>`` block when there is one
  (reasoning-gym's own prompt format); else, when the expected answer is a number, the last
  number of the completion ("17 + 25 = 42." -> ``42``; commas, ``$``, a trailing period and
  the Unicode minus are normalised, and ``42.0`` counts as ``42``); else the completion
  without surrounding white space and a trailing period;
* ``tag``: only an ``<answer>`` block counts (none: score 0);
* ``last_number``: only the last number counts;
* ``whole``: the whole completion, stripped.

A completion cut at ``max_new_tokens`` is scored like any other (a number before the cut
counts); the ``extracted`` component says how often an answer was found at all.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel

from rlctl.config.strict import STRICT_CONFIG
from rlctl.rewards.base import RewardInput

Extract = Literal["auto", "tag", "last_number", "whole"]
_NUMBER = re.compile(r"[-+]?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


class ReasoningGymRewardOptions(BaseModel):
    """Options of the ``reasoning_gym`` reward."""

    model_config = STRICT_CONFIG

    extract: Extract = "auto"
    """How the answer is taken out of the completion (see the module doc)."""
    tag: str = "answer"
    """The tag of ``<tag>...</tag>`` answer blocks."""


def _normalise_number(text: str) -> str:
    cleaned = text.replace(",", "").replace("$", "").lstrip("+")
    try:
        value = float(cleaned)
    except ValueError:
        return cleaned
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else cleaned


def _is_number(text: str) -> bool:
    return _NUMBER.fullmatch(text.strip()) is not None


def last_number(text: str) -> str | None:
    """The last number in ``text``, normalised (``"1,200."`` -> ``"1200"``), or ``None``."""
    found = _NUMBER.findall(text.replace("\u2212", "-"))
    return _normalise_number(found[-1]) if found else None


def tagged(text: str, tag: str) -> str | None:
    """The stripped content of the last ``<tag>...</tag>`` block, or ``None``."""
    blocks = re.findall(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", text, flags=re.DOTALL)
    return blocks[-1].strip() if blocks else None


def extract_answer(text: str, expected: str, extract: Extract = "auto",
                   tag: str = "answer") -> str | None:
    """The answer in completion ``text`` (see the module doc); ``None`` when there is none."""
    if extract in ("auto", "tag"):
        block = tagged(text, tag)
        if block is not None or extract == "tag":
            if block is not None and _is_number(expected) and _is_number(block):
                return _normalise_number(block)
            return block
    if extract == "last_number" or (extract == "auto" and _is_number(expected)):
        return last_number(text)
    whole = text.strip().removesuffix(".").strip()
    return whole or None


@cache
def _scorer(dataset: str) -> Any:
    """The generator's ``score_answer`` (built once per process and dataset name)."""
    try:
        import reasoning_gym
    except ImportError:
        raise ImportError('the reasoning_gym reward needs the reasoning-gym package: '
                          'pip install "rlctl[real]"') from None
    return reasoning_gym.get_score_answer_fn(dataset)


def reasoning_gym(sample: RewardInput, *, extract: Extract = "auto",
                  tag: str = "answer") -> dict[str, float]:
    """The generator's own score of the extracted answer (see the module doc)."""
    info = sample.ground_truth.get("reasoning_gym")
    if not isinstance(info, dict) or "dataset" not in info or "entry" not in info:
        raise ValueError(
            f"a sample from {sample.data_source!r} has no reasoning_gym ground truth: the "
            "reasoning_gym reward scores prompts of the reasoning_gym task")
    entry = info["entry"]
    expected = str(entry["answer"])
    answer = extract_answer(sample.response_text, expected, extract, tag)
    if answer is None:
        return {"score": 0.0, "extracted": 0.0}
    if _is_number(expected):
        expected_norm = _normalise_number(expected)
        if answer == expected_norm:  # "42.0" / "+42" for "42": the verifier wants its spelling
            answer = expected
    score = float(_scorer(info["dataset"])(answer, entry))
    return {"score": score, "extracted": 1.0}
