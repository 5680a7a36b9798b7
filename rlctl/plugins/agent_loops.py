"""Built-in agent loops."""

from __future__ import annotations

from rlctl.hookspecs import hookimpl


@hookimpl
def register_agent_loops(register):
    register(
        "single_turn",
        "rlctl.trainer.worker.agent_loop:SingleTurnAgentLoop",
        description="one generation per session (prompt in, response out)",
    )
