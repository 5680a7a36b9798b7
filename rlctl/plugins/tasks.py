"""Built-in synthetic tasks (``[data] task = NAME``).

Each target is ``target(options, *, seed=0, split="train") -> PromptSource``; ``split`` picks an
independent stream (use ``"val"`` for validation prompts).
"""

from __future__ import annotations

from rlctl.hookspecs import hookimpl


@hookimpl
def register_tasks(register) -> None:  # type: ignore[no-untyped-def]
    # Imported on use: the registry imports this module for `rlctl --help` (no pydantic).
    from rlctl.tasks.synthetic import (
        CountDigitsOptions,
        MaxDigitOptions,
        ReverseDigitsOptions,
        SortDigitsOptions,
    )
    register(
        "count_digits",
        "rlctl.tasks.synthetic:count_digits",
        options=CountDigitsOptions,
        description="1-9 digits then '=' -> how many digits (tiny models learn it in ~1 min)",
        reward="digits_match",
    )
    register(
        "max_digit",
        "rlctl.tasks.synthetic:max_digit",
        options=MaxDigitOptions,
        description="4-6 digits then '=' -> the largest digit",
        reward="digits_match",
    )
    register(
        "sort_digits",
        "rlctl.tasks.synthetic:sort_digits",
        options=SortDigitsOptions,
        description="3 digits then '=' -> the digits in ascending order",
        reward="digits_match",
    )
    register(
        "reverse_digits",
        "rlctl.tasks.synthetic:reverse_digits",
        options=ReverseDigitsOptions,
        description="4-6 digits then '=' -> the digits reversed (needs a GPU-sized model)",
        reward="digits_match",
    )
