"""Built-in reward functions (``[[rewards]] name = NAME``): pure Python, no torch."""

from __future__ import annotations

from rlctl.hookspecs import hookimpl
from rlctl.rewards.gsm8k import Gsm8kOptions
from rlctl.rewards.match import DigitsMatchOptions, ExactMatchOptions
from rlctl.rewards.shaping import LengthPenaltyOptions


@hookimpl
def register_reward_functions(register) -> None:  # type: ignore[no-untyped-def]
    register(
        "digits_match",
        "rlctl.rewards.match:digits_match",
        options=DigitsMatchOptions,
        description="correct positions / max(target, completion length), cut at the first eos",
    )
    register(
        "exact_match",
        "rlctl.rewards.match:exact_match",
        options=ExactMatchOptions,
        description="1 when the completion equals the answer, else 0",
    )
    register(
        "gsm8k",
        "rlctl.rewards.gsm8k:gsm8k",
        options=Gsm8kOptions,
        description="final number (after '####', or the last one) equals the answer",
    )
    register(
        "length_penalty",
        "rlctl.rewards.shaping:length_penalty",
        options=LengthPenaltyOptions,
        description="shaping term in [-1, 0] that grows with response length",
    )
