"""Built-in tools and tool-call parsers, and the ``tool`` agent loop's tasks (issue 15)."""

from __future__ import annotations

from rlctl.hookspecs import hookimpl


@hookimpl
def register_tools(register) -> None:  # type: ignore[no-untyped-def]
    from rlctl.agents.builtin_tools import CalculatorOptions, LookupOptions

    register("calculator", "rlctl.agents.builtin_tools:Calculator", options=CalculatorOptions,
             description="evaluate an arithmetic expression (parsed, never eval-ed)")
    register("lookup", "rlctl.agents.builtin_tools:Lookup", options=LookupOptions,
             description="answer with a value stored with the prompt, hidden from the model")


@hookimpl
def register_tool_parsers(register) -> None:  # type: ignore[no-untyped-def]
    register("hermes", "rlctl.agents.tool_parsers:HermesToolParser",
             description="<tool_call>{json}</tool_call> blocks; results as tool messages")
    register("compact", "rlctl.agents.tool_parsers:CompactToolParser",
             description="tiny models: ARGS# calls the one tool, its result follows as text")


def tool_called(sample, **options) -> float:  # type: ignore[no-untyped-def]
    """1.0 when the episode made at least one tool call that returned (``extra["tool_calls"]``).

    A small shaping bonus for the first steps of a model that has never used the tool.
    """
    calls = float(sample.extra.get("tool_calls", 0.0)) - float(sample.extra.get("tool_errors", 0.0))
    return 1.0 if calls > 0 else 0.0


@hookimpl
def register_reward_functions(register) -> None:  # type: ignore[no-untyped-def]
    register("tool_called", tool_called,
             description="1 when the episode made a tool call that returned (a shaping bonus)")


@hookimpl
def register_tasks(register) -> None:  # type: ignore[no-untyped-def]
    from rlctl.tasks.agent_tasks import ToolSecretOptions

    register("tool_secret", "rlctl.tasks.agent_tasks:tool_secret", options=ToolSecretOptions,
             description="digits then '=' -> a hidden digit only the lookup tool returns",
             reward="digits_match")
