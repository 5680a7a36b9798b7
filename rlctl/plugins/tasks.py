"""Built-in synthetic tasks (``[data] task = NAME``).

Each target is ``target(options, *, seed=0, split="train") -> PromptSource``; ``split`` picks an
independent stream (use ``"val"`` for validation prompts).
"""

from __future__ import annotations

from rlctl.hookspecs import hookimpl


@hookimpl
def register_tasks(register) -> None:  # type: ignore[no-untyped-def]
    # Imported on use: the registry imports this module for `rlctl --help` (no pydantic).
    from rlctl.tasks.reasoning_gym_task import ReasoningGymOptions
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
        "reasoning_gym",
        "rlctl.tasks.reasoning_gym_task:reasoning_gym_task",
        options=ReasoningGymOptions,
        description="a reasoning-gym generator (pip install 'rlctl[real]'); held-out split "
        "by seed, verified by its own score_answer",
        reward="reasoning_gym",
    )
    register(
        "reverse_digits",
        "rlctl.tasks.synthetic:reverse_digits",
        options=ReverseDigitsOptions,
        description="4-6 digits then '=' -> the digits reversed (needs a GPU-sized model)",
        reward="digits_match",
    )


@hookimpl
def validate_config(recipe):  # type: ignore[no-untyped-def]
    """A reasoning_gym validation must score its whole held-out split, the same every time."""
    from rlctl.config.problems import ConfigProblem

    data = recipe.data
    held_out = data.task_options.get("held_out", 64)
    if (data.task != "reasoning_gym" or not recipe.schedule.eval_every
            or not isinstance(held_out, int) or data.val_size == held_out):
        return []
    return [ConfigProblem(
        "data.val_size",
        f"data.val_size = {data.val_size} but the reasoning_gym task holds out {held_out} "
        "questions: every validation would score a different "
        + ("subset" if data.val_size < held_out else "set, some questions twice"),
        f"set data.val_size = {held_out} (or data.task_options.held_out = {data.val_size})")]
