"""The ``tool`` plugin kind: what a tool is and how one call runs (with its limits).

A registered tool target is ``target(options) -> Tool``. Build it cheaply (connect lazily):
the controller builds the tools once to put their schemas into the chat template, and each
rollout worker builds its own to call them.

A :class:`Tool` has a ``name``, a ``schema()`` (the OpenAI function description whose
``parameters`` is a JSON schema; chat templates render it) and ``call(arguments, ctx)``,
sync or async, returning the result text. :func:`run_call` runs one call under a timeout: a
hung tool is cut off, a raising tool becomes an error result (or a session failure when the
loop's ``on_tool_error = "fail"``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rlctl.agents.contract import PluginChoice, PromptRecord


@dataclass
class ToolContext:
    """What a tool call knows about its episode."""

    record: PromptRecord
    """The prompt (its ``ground_truth`` may carry data meant for tools, never shown to the
    model)."""
    session_id: int
    """Which of the prompt's sessions calls."""
    state: dict[str, Any] = field(default_factory=dict)
    """Scratch space shared by the tool calls of one session (per tool name)."""


@runtime_checkable
class Tool(Protocol):
    """A callable tool (see the module docstring)."""

    name: str

    def schema(self) -> dict[str, Any]: ...

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> Any: ...


@dataclass(frozen=True)
class ToolCall:
    """One call read out of a generated turn."""

    name: str
    arguments: dict[str, Any]
    error: str | None = None
    """Why the call could not be read (bad JSON...); the loop answers it with this error."""


@dataclass(frozen=True)
class ToolResult:
    """What one call returned: the text the model reads, and how it went."""

    name: str
    text: str
    ok: bool = True
    timed_out: bool = False


class ToolFailure(RuntimeError):
    """A tool call failed and the loop is set to fail the session (``on_tool_error = "fail"``)."""


def function_schema(
    name: str, description: str, properties: dict[str, Any], required: list[str] | None = None
) -> dict[str, Any]:
    """An OpenAI-style function description (what chat templates expect for ``tools=``)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(required or []),
            },
        },
    }


async def run_call(
    tools: dict[str, Tool],
    call: ToolCall,
    ctx: ToolContext,
    *,
    timeout_s: float,
    on_error: str,
    max_chars: int,
) -> ToolResult:
    """Run one call: unknown tools, bad arguments, exceptions and timeouts become error
    results the model reads, or :class:`ToolFailure` when ``on_error == "fail"``."""

    def failed(text: str, *, timed_out: bool = False) -> ToolResult:
        if on_error == "fail":
            raise ToolFailure(f"tool call {call.name!r} failed: {text}")
        return ToolResult(call.name, f"error: {text}", ok=False, timed_out=timed_out)

    if call.error is not None:
        return failed(call.error)
    tool = tools.get(call.name)
    if tool is None:
        return failed(f"no tool named {call.name!r} (tools: {', '.join(sorted(tools))})")
    try:
        if inspect.iscoroutinefunction(tool.call):
            value = await asyncio.wait_for(tool.call(call.arguments, ctx), timeout_s)
        else:  # a blocking tool runs in a thread so it cannot stall the other sessions
            value = await asyncio.wait_for(
                asyncio.to_thread(tool.call, call.arguments, ctx), timeout_s
            )
    except TimeoutError:
        return failed(f"timed out after {timeout_s:g} s", timed_out=True)
    except ToolFailure:
        raise
    except Exception as exc:  # noqa: BLE001 -- the model reads what went wrong, as a tool result
        return failed(f"{type(exc).__name__}: {exc}")
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > max_chars:
        text = text[:max_chars] + "...(truncated)"
    return ToolResult(call.name, text)


def build_tools(choices: Sequence[PluginChoice], registry: Any) -> dict[str, Tool]:
    """The recipe's ``[[rollout.tools]]`` by name (each with its options as validated at
    load; :func:`rlctl.agents.contract.tool_choices`)."""
    tools: dict[str, Tool] = {}
    for choice in choices:
        tool = registry.load("tool", choice.name)(choice.options)
        name = tool.name or choice.name
        if name in tools:
            raise ValueError(f"two [[rollout.tools]] are named {name!r}; give each tool once")
        tools[name] = tool
    return tools
