"""Built-in tool-call parsers of the ``tool`` agent loop and the gateway (issue 15)."""

from __future__ import annotations

from rlctl.hookspecs import hookimpl


@hookimpl
def register_tool_parsers(register) -> None:  # type: ignore[no-untyped-def]
    register(
        "hermes",
        "rlctl.agents.tool_parsers:HermesToolParser",
        description="<tool_call>{json}</tool_call> blocks; results as tool messages",
    )
    register(
        "compact",
        "rlctl.agents.tool_parsers:CompactToolParser",
        description="tiny models: ARGS# calls the one tool, its result follows as text",
    )
