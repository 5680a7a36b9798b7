"""Built-in agent loops, and the checks that a recipe gives each loop what it uses."""

from __future__ import annotations

from rlctl.config.problems import ConfigProblem
from rlctl.hookspecs import hookimpl


@hookimpl
def register_agent_loops(register):
    from rlctl.agents.env_loop import EnvLoopOptions
    from rlctl.agents.openai_options import OpenAIAgentOptions
    from rlctl.agents.tool_loop import ToolLoopOptions

    register(
        "single_turn",
        "rlctl.agents.single_turn:SingleTurnAgentLoop",
        description="one generation per session (prompt in, response out)",
    )
    register(
        "tool",
        "rlctl.agents.tool_loop:ToolAgentLoop",
        options=ToolLoopOptions,
        description="multi-turn: tool calls run, their results come back as observations",
        uses=("tools", "tool_parser"),
    )
    register(
        "env",
        "rlctl.agents.env_loop:EnvAgentLoop",
        options=EnvLoopOptions,
        description="multi-step episodes against a registered environment (reset/step)",
        uses=("environment",),
    )
    register(
        "openai_agent",
        "rlctl.agents.openai_loop:OpenAIAgentLoop",
        options=OpenAIAgentOptions,
        description="a user function drives the episode through an OpenAI-compatible gateway",
    )


def agent_reward(sample, **options) -> float:  # type: ignore[no-untyped-def]
    """The number the agent function returned (``extra["agent_reward"]``, openai_agent loop)."""
    if "agent_reward" not in sample.extra:
        raise KeyError(
            "no agent_reward in the sample: the agent function must return a number "
            '([rollout] agent_loop = "openai_agent")'
        )
    return float(sample.extra["agent_reward"])


@hookimpl
def register_reward_functions(register) -> None:  # type: ignore[no-untyped-def]
    register(
        "agent_reward",
        agent_reward,
        description="the number the openai_agent loop's agent function returned",
    )


# recipe field -> what it is called in messages
_USES = {
    "tools": "[[rollout.tools]]",
    "tool_parser": "rollout.tool_parser",
    "environment": "[rollout.environment]",
}


@hookimpl
def validate_config(recipe):  # type: ignore[no-untyped-def]
    """Tools / parser / environment given to a loop that ignores them, or missing for one that
    needs them (a loop that is not registered is reported elsewhere)."""
    from rlctl.registry import get_registry

    ro = recipe.rollout
    reg = get_registry().find("agent_loop", ro.agent_loop)
    if reg is None:
        return []
    uses = set(reg.metadata.get("uses", ()))
    problems = []
    given = {
        "tools": bool(ro.tools),
        "tool_parser": ro.tool_parser is not None,
        "environment": ro.environment is not None,
    }
    for name, present in given.items():
        if present and name not in uses:
            problems.append(
                ConfigProblem(
                    f"rollout.{name}",
                    f'agent loop "{ro.agent_loop}" does not use {_USES[name]}',
                    "remove it, or choose an agent loop that uses it "
                    "(tool: tools; env: environment)",
                )
            )
    if "tools" in uses and not ro.tools:
        problems.append(
            ConfigProblem(
                "rollout.tools",
                f'agent loop "{ro.agent_loop}" needs tools, none are given',
                'add [[rollout.tools]] tables, e.g. name = "calculator"',
            )
        )
    if "environment" in uses and ro.environment is None:
        problems.append(
            ConfigProblem(
                "rollout.environment",
                f'agent loop "{ro.agent_loop}" needs an environment',
                'add [rollout.environment] with name = "<a registered environment>"',
            )
        )
    agent = ro.agent_loop_options.get("agent") if ro.agent_loop == "openai_agent" else None
    if isinstance(agent, str):  # its form is the option model's check; does it exist?
        from rlctl.registry_targets import split_target, static_problem

        try:
            split_target(agent)
        except ValueError:  # malformed: the option model reports it
            why = None
        else:
            why = static_problem(agent)
        if why is not None:
            problems.append(
                ConfigProblem(
                    "rollout.agent_loop_options.agent",
                    f"the agent function {agent!r} cannot be loaded: {why}",
                    'name an async function as "package.module:function" that the rollout '
                    "workers can import",
                )
            )
    if ro.tool_parser == "compact" and len(ro.tools) > 1:
        problems.append(
            ConfigProblem(
                "rollout.tool_parser",
                f"the compact tool-call format calls one tool, {len(ro.tools)} are given",
                'offer one tool or use tool_parser = "hermes"',
            )
        )
    return problems
