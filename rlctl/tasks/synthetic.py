"""Synthetic digit tasks with verifiable answers, for training tiny models offline.

Every prompt is ``<digits>=`` (the tiny tokenizer prepends ``<bos>``) and the answer is a
short digit string that ``digits_match`` scores with partial credit. What a 76k-parameter
Qwen3 learns by GRPO in minutes is measured in ``../shared/notes/tiny-task.md``:
``count_digits``, ``max_digit`` and ``sort_digits`` are learnt; ``reverse_digits`` is not
(kept for GPUs and bigger models).

Prompt ``i`` of epoch ``e`` is drawn from its own RNG seeded by ``(task, seed, e, i)``, so
the stream is deterministic, random-access and trivially resumable.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from pydantic import BaseModel, Field, PositiveInt, model_validator

from rlctl.config.strict import STRICT_CONFIG
from rlctl.tasks.prompt import Prompt


class DigitTaskOptions(BaseModel):
    """Options shared by the digit tasks (``[data] task_options``)."""

    model_config = STRICT_CONFIG

    min_digits: PositiveInt = 1
    """Fewest digits in a prompt."""
    max_digits: PositiveInt = 9
    """Most digits in a prompt."""
    epoch_size: PositiveInt = 100_000
    """Prompts per epoch (epochs only change the random stream; prompts are drawn fresh)."""

    @model_validator(mode="after")
    def _range(self) -> DigitTaskOptions:
        if self.min_digits > self.max_digits:
            raise ValueError(
                f"min_digits ({self.min_digits}) > max_digits ({self.max_digits}): "
                "set min_digits <= max_digits"
            )
        return self


class CountDigitsOptions(DigitTaskOptions):
    """Options of ``count_digits``: the answer is the number of digits (one token, 1-9)."""

    max_digits: int = Field(9, ge=1, le=9)
    """Most digits in a prompt (at most 9 so that the answer stays one digit)."""


class MaxDigitOptions(DigitTaskOptions):
    """Options of ``max_digit``: the answer is the largest digit."""

    min_digits: PositiveInt = 4
    """Fewest digits in a prompt."""
    max_digits: PositiveInt = 6
    """Most digits in a prompt."""


class SortDigitsOptions(DigitTaskOptions):
    """Options of ``sort_digits``: the answer is the digits in ascending order."""

    min_digits: PositiveInt = 3
    """Fewest digits in a prompt."""
    max_digits: PositiveInt = 3
    """Most digits in a prompt."""


class ReverseDigitsOptions(DigitTaskOptions):
    """Options of ``reverse_digits``: the answer is the digits reversed (hard for tiny models)."""

    min_digits: PositiveInt = 4
    """Fewest digits in a prompt."""
    max_digits: PositiveInt = 6
    """Most digits in a prompt."""


def _count(digits: str) -> str:
    return str(len(digits))


def _max(digits: str) -> str:
    return max(digits)


def _sort(digits: str) -> str:
    return "".join(sorted(digits))


def _reverse(digits: str) -> str:
    return digits[::-1]


class DigitTask:
    """A :class:`~rlctl.tasks.prompt.PromptSource` of ``<digits>=`` prompts."""

    def __init__(
        self,
        name: str,
        answer: Callable[[str], str],
        options: DigitTaskOptions,
        *,
        seed: int = 0,
        split: str = "train",
    ) -> None:
        self.name = name
        self.answer = answer
        self.options = options
        self.seed = seed
        self.split = split  # a different split gives a different stream (validation)
        self.epoch = 0
        self.position = 0

    def __len__(self) -> int:
        return self.options.epoch_size

    def prompt_at(self, epoch: int, index: int) -> Prompt:
        """The ``index``-th prompt of ``epoch`` (pure function of the seed)."""
        # String seeds hash with SHA-512 inside `random`: stable across runs and processes.
        rng = random.Random(f"{self.name}:{self.split}:{self.seed}:{epoch}:{index}")
        n = rng.randint(self.options.min_digits, self.options.max_digits)
        digits = "".join(rng.choice("0123456789") for _ in range(n))
        return Prompt(
            text=f"{digits}=",
            ground_truth={"ground_truth": self.answer(digits)},
            data_source=self.name,
            extra={"epoch": epoch, "index": index},
        )

    def __iter__(self) -> Iterator[Prompt]:
        while True:
            if self.position >= len(self):
                self.epoch += 1
                self.position = 0
            prompt = self.prompt_at(self.epoch, self.position)
            self.position += 1
            yield prompt

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


def count_digits(options: CountDigitsOptions, *, seed: int = 0, split: str = "train") -> DigitTask:
    """``<bos>48213=`` -> ``5<eos>``."""
    return DigitTask("count_digits", _count, options, seed=seed, split=split)


def max_digit(options: MaxDigitOptions, *, seed: int = 0, split: str = "train") -> DigitTask:
    """``<bos>48213=`` -> ``8<eos>``."""
    return DigitTask("max_digit", _max, options, seed=seed, split=split)


def sort_digits(options: SortDigitsOptions, *, seed: int = 0, split: str = "train") -> DigitTask:
    """``<bos>482=`` -> ``248<eos>``."""
    return DigitTask("sort_digits", _sort, options, seed=seed, split=split)


def reverse_digits(
    options: ReverseDigitsOptions, *, seed: int = 0, split: str = "train"
) -> DigitTask:
    """``<bos>4821=`` -> ``1284<eos>`` (not learnable by the tiny model in minutes)."""
    return DigitTask("reverse_digits", _reverse, options, seed=seed, split=split)
