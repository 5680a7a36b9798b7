"""Built-in tools, and the ``tool`` agent loop's task and reward (issue 15)."""

from __future__ import annotations

from rlctl.hookspecs import hookimpl


@hookimpl
def register_tools(register) -> None:  # type: ignore[no-untyped-def]
    from rlctl.agents.builtin_tools import CalculatorOptions, LookupOptions

    register(
        "calculator",
        "rlctl.agents.builtin_tools:Calculator",
        options=CalculatorOptions,
        description="evaluate an arithmetic expression (parsed, never eval-ed)",
    )
    register(
        "lookup",
        "rlctl.agents.builtin_tools:Lookup",
        options=LookupOptions,
        description="answer with a value stored with the prompt, hidden from the model",
    )


def tool_answer_match(sample, **options) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """``digits_match`` of the final answer, counted only after a tool call that returned.

    For tasks whose answer only a tool knows (``tool_secret``): a guess without looking the
    value up scores 0 however lucky it is, so guessing is never a way to the reward.
    """
    from rlctl.rewards.match import digits_match

    returned = float(sample.extra.get("tool_calls", 0.0)) - float(
        sample.extra.get("tool_errors", 0.0)
    )
    result = digits_match(sample)
    return result if returned > 0 else {"score": 0.0, "exact": 0.0}


@hookimpl
def register_reward_functions(register) -> None:  # type: ignore[no-untyped-def]
    register(
        "tool_answer_match",
        tool_answer_match,
        description="digits_match of the answer, 0 unless a tool call returned first",
    )


@hookimpl
def register_tasks(register) -> None:  # type: ignore[no-untyped-def]
    from rlctl.tasks.agent_tasks import ToolSecretOptions

    register(
        "tool_secret",
        "rlctl.tasks.agent_tasks:tool_secret",
        options=ToolSecretOptions,
        description="digits then '=' -> a hidden digit only the lookup tool returns",
        reward="tool_answer_match",
    )
