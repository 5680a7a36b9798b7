"""What a reward function receives.

Reward functions are plain Python, run inside rollout workers (never in the controller), and
must not import torch. ``response_text`` is the completion *up to, not including, the first
eos*, decoded **with** any other special token it contains: build it with
:meth:`RewardInput.from_tokens` so every reward sees the same cut. Keeping special tokens is
deliberate: a model that learns to end its answer with ``<pad>`` instead of eos would
otherwise look perfect to a string reward (measured on the tiny task: it did exactly that).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class _Decoder(Protocol):
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


@dataclass(frozen=True)
class RewardInput:
    """One sample to score."""

    prompt_text: str
    """The prompt as decoded text (special tokens removed)."""
    response_text: str
    """The completion before the first eos, other special tokens kept (see module doc)."""
    response_ids: tuple[int, ...]
    """Every generated token id, eos included when the model stopped."""
    ground_truth: dict[str, Any]
    """The prompt's ground truth; the answer is under ``"ground_truth"``."""
    data_source: str
    """Task or dataset name of the prompt."""
    finish_reason: str = "stop"
    """``stop`` (eos emitted) or ``length`` (hit max_new_tokens)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else the agent loop knows (turn count, tool calls...)."""
    prompt_ids: tuple[int, ...] = ()
    """The prompt's token ids (what a reward model reads, with ``response_ids``)."""

    @property
    def answer(self) -> str:
        """The ground-truth answer as a string."""
        if "ground_truth" not in self.ground_truth:
            raise KeyError(
                f"sample from {self.data_source!r} has no 'ground_truth' in its ground truth "
                f"(keys: {sorted(self.ground_truth)})"
            )
        return str(self.ground_truth["ground_truth"])

    @classmethod
    def from_tokens(
        cls,
        tokenizer: _Decoder,
        *,
        prompt_ids: Sequence[int],
        response_ids: Sequence[int],
        ground_truth: dict[str, Any],
        data_source: str,
        eos_token_ids: Sequence[int],
        extra: dict[str, Any] | None = None,
        prompt_text: str | None = None,
    ) -> RewardInput:
        """Decode a sample; the completion is cut at the first eos. ``prompt_text``: the
        prompt already decoded (the samples of a group share it)."""
        ids = [int(t) for t in response_ids]
        eos = {int(e) for e in eos_token_ids}
        cut = next((i for i, t in enumerate(ids) if t in eos), None)
        completion = ids if cut is None else ids[:cut]
        return cls(
            prompt_text=(tokenizer.decode(list(prompt_ids), skip_special_tokens=True)
                         if prompt_text is None else prompt_text),
            response_text=tokenizer.decode(completion, skip_special_tokens=False),
            response_ids=tuple(ids),
            ground_truth=dict(ground_truth),
            data_source=data_source,
            finish_reason="length" if cut is None else "stop",
            extra=dict(extra or {}),
            prompt_ids=tuple(int(t) for t in prompt_ids),
        )
