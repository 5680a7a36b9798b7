"""Synthetic tasks for the agent loops, learnable by the tiny model on a CPU.

* ``tool_secret``: the prompt is ``<digits>=`` and the answer is a digit drawn at random per
  prompt, independent of the prompt and stored in the ground truth under ``secret``: only
  the ``lookup`` tool can tell it. Without the tool a model can at best guess (0.1).
* ``guess_digit``: the prompt is ``?`` and the ground truth a hidden digit; the
  ``guess_digit`` environment answers each guess with higher / lower.

Like the digit tasks, prompt ``i`` of epoch ``e`` comes from its own seeded RNG.
"""

from __future__ import annotations

import random

from pydantic import Field

from rlctl.tasks.prompt import Prompt
from rlctl.tasks.synthetic import DigitTask, DigitTaskOptions


class ToolSecretOptions(DigitTaskOptions):
    """Options of ``tool_secret``."""

    min_digits: int = Field(1, ge=1)
    """Fewest digits in a prompt (the question; it does not determine the answer)."""
    max_digits: int = Field(3, ge=1)
    """Most digits in a prompt."""


class GuessDigitTaskOptions(DigitTaskOptions):
    """Options of ``guess_digit`` (the digit counts are unused: the prompt is ``?``)."""

    low: int = Field(0, ge=0, le=9)
    """Smallest hidden digit."""
    high: int = Field(9, ge=0, le=9)
    """Largest hidden digit (keep it equal to the environment's ``high``)."""


class ToolSecretTask(DigitTask):
    """``<digits>=`` prompts whose answer only the ``lookup`` tool knows."""

    def prompt_at(self, epoch: int, index: int) -> Prompt:
        rng = random.Random(f"{self.name}:{self.split}:{self.seed}:{epoch}:{index}")
        n = rng.randint(self.options.min_digits, self.options.max_digits)
        digits = "".join(rng.choice("0123456789") for _ in range(n))
        secret = str(rng.randint(0, 9))
        return Prompt(
            text=f"{digits}=",
            ground_truth={"ground_truth": secret, "secret": secret},
            data_source=self.name,
            extra={"epoch": epoch, "index": index},
        )


class GuessDigitTask(DigitTask):
    """``?`` prompts with a hidden digit for the ``guess_digit`` environment."""

    options: GuessDigitTaskOptions

    def prompt_at(self, epoch: int, index: int) -> Prompt:
        rng = random.Random(f"{self.name}:{self.split}:{self.seed}:{epoch}:{index}")
        target = str(rng.randint(self.options.low, self.options.high))
        return Prompt(
            text="?",
            ground_truth={"ground_truth": target},
            data_source=self.name,
            extra={"epoch": epoch, "index": index},
        )


def tool_secret(
    options: ToolSecretOptions, *, seed: int = 0, split: str = "train"
) -> ToolSecretTask:
    """``<bos>482=`` -> the hidden digit, e.g. ``7<eos>``, after asking ``lookup``."""
    return ToolSecretTask("tool_secret", str, options, seed=seed, split=split)


def guess_digit(
    options: GuessDigitTaskOptions, *, seed: int = 0, split: str = "train"
) -> GuessDigitTask:
    """``<bos>?`` -> guesses until the hidden digit is found."""
    return GuessDigitTask("guess_digit", str, options, seed=seed, split=split)
