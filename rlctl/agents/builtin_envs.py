"""Built-in environments: ``guess_digit`` (find a hidden digit from higher/lower feedback)."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from rlctl.agents.contract import PromptRecord
from rlctl.agents.environment import StepResult
from rlctl.config.strict import STRICT_CONFIG


class GuessDigitOptions(BaseModel):
    """Options of the ``guess_digit`` environment."""

    model_config = STRICT_CONFIG

    low: int = Field(0, ge=0, le=9)
    """Smallest digit the target can be."""
    high: int = Field(9, ge=0, le=9)
    """Largest digit the target can be."""
    higher: str = "+"
    """Observation after a guess below the target."""
    lower: str = "-"
    """Observation after a guess above the target."""
    invalid: str = "?"
    """Observation after an action that is not one digit in [low, high]."""
    end_on_invalid: bool = True
    """End the episode (reward 0) on an action that is not one digit in [low, high]."""

    @model_validator(mode="after")
    def _range(self) -> GuessDigitOptions:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) > high ({self.high}): set low <= high")
        return self


class GuessDigit:
    """Each action is one digit; the answer is ``higher`` / ``lower`` until it is right.

    The target is the prompt's ground truth (the ``guess_digit`` task draws it). Reward 1.0
    on the step that finds it, else 0.
    """

    def __init__(self, options: GuessDigitOptions | None = None) -> None:
        self.options = options or GuessDigitOptions()
        self.target = -1

    def reset(self, record: PromptRecord) -> str:
        self.target = int(record.ground_truth["ground_truth"])
        return ""

    def step(self, action: str) -> StepResult:
        o = self.options
        guess = action.strip()
        if len(guess) != 1 or not guess.isdigit() or not o.low <= int(guess) <= o.high:
            return StepResult(o.invalid, 0.0, o.end_on_invalid, {"valid": False})
        value = int(guess)
        if value == self.target:
            return StepResult("", 1.0, True, {"valid": True})
        return StepResult(o.higher if value < self.target else o.lower, 0.0, False, {"valid": True})
