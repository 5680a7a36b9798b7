"""A generative judge: the rollout engine reads a filled-in template and replies with a score.

``[[rewards]] name = "llm_judge"`` (registration kind ``judge``). Judges run in the rollout
workers, after a sample is generated, and ask the rollout engine - the policy being trained,
with its current weights - through ``ask(text, max_new_tokens=, temperature=, chat=)``,
which tokenises ``text`` (as a user message through the chat template when ``chat`` and the
tokenizer has one), generates, and returns the decoded reply. The score is the last number
the reply's ``pattern`` matches, divided by ``scale``; a reply without one scores
``default`` (the ``parsed`` component, 0 or 1, counts how often that happens).
"""

from __future__ import annotations

import re
import string
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field, PositiveFloat, PositiveInt, field_validator

from rlctl.config.strict import STRICT_CONFIG
from rlctl.rewards.base import RewardInput

Ask = Callable[..., Awaitable[str]]

FIELDS = ("prompt", "response", "answer")
DEFAULT_TEMPLATE = (
    "Rate the response to the question from 0 to 10.\n"
    "Question: {prompt}\nReference answer: {answer}\nResponse: {response}\n"
    "Reply with the score only."
)


class LLMJudgeOptions(BaseModel):
    """Options of ``llm_judge``."""

    model_config = STRICT_CONFIG

    template: str = DEFAULT_TEMPLATE
    """The judge's prompt; ``{prompt}``, ``{response}`` and ``{answer}`` are filled in."""
    pattern: str = r"-?\d+(?:\.\d+)?"
    """Regular expression of the score in the reply (its group, if any); the last match wins."""
    scale: PositiveFloat = 10.0
    """The parsed number is divided by this (10: a 0-10 rating becomes 0-1)."""
    default: float = 0.0
    """Score of a reply in which ``pattern`` finds nothing."""
    max_new_tokens: PositiveInt = 8
    """Most tokens of the judge's reply."""
    temperature: float = Field(0.0, ge=0)
    """Sampling temperature of the reply (0 = greedy)."""
    chat: bool = True
    """Send the filled template as a user message through the tokenizer's chat template."""

    @field_validator("template")
    @classmethod
    def _known_fields(cls, value: str) -> str:
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
        except ValueError as exc:
            raise ValueError(
                f"not a format string ({exc}); write literal braces as {{{{ }}}}") from None
        unknown = sorted(names - set(FIELDS))
        if unknown:
            raise ValueError(f"unknown field(s) {unknown}; the template may use {list(FIELDS)}")
        if "response" not in names:
            raise ValueError("the template must contain {response}: the judge has to see it")
        return value

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        if compiled.groups > 1:
            raise ValueError(f"{compiled.groups} groups; use at most one (the score)")
        return value


def parse_score(reply: str, options: LLMJudgeOptions) -> float | None:
    """The score in ``reply`` (already divided by ``scale``), or None when there is none."""
    for found in reversed(re.findall(options.pattern, reply)):
        try:
            return float(found) / options.scale
        except ValueError:
            continue  # a match that is not a number (a loose pattern): try the one before
    return None


class LLMJudge:
    """Fills the template, asks the rollout engine, parses the reply."""

    def __init__(self, options: LLMJudgeOptions) -> None:
        self.options = options

    def judge_prompt(self, sample: RewardInput) -> str:
        answer: Any = sample.ground_truth.get("ground_truth", "")
        return self.options.template.format(
            prompt=sample.prompt_text, response=sample.response_text, answer=answer)

    async def __call__(self, sample: RewardInput, ask: Ask) -> dict[str, float]:
        o = self.options
        reply = await ask(self.judge_prompt(sample), max_new_tokens=o.max_new_tokens,
                          temperature=o.temperature, chat=o.chat)
        score = parse_score(reply, o)
        if score is None:
            return {"score": o.default, "parsed": 0.0}
        return {"score": score, "parsed": 1.0}
