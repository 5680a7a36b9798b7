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
    if ro.agent_loop == "openai_agent":
        problems += _openai_agent_problems(recipe)
    if ro.tool_parser == "compact" and len(ro.tools) > 1:
        problems.append(
            ConfigProblem(
                "rollout.tool_parser",
                f"the compact tool-call format calls one tool, {len(ro.tools)} are given",
                'offer one tool or use tool_parser = "hermes"',
            )
        )
    return problems


def _openai_agent_problems(recipe):  # type: ignore[no-untyped-def]
    """The agent function exists and is async; the model has a chat template (the gateway
    renders every request with it)."""
    from rlctl.registry_targets import split_target, static_definition, static_problem

    problems = []
    agent = recipe.rollout.agent_loop_options.get("agent")
    if isinstance(agent, str):  # its form is the option model's check; does it exist?
        try:
            split_target(agent)
        except ValueError:  # malformed: the option model reports it
            why = None
        else:
            why = static_problem(agent)
            kind = static_definition(agent) if why is None else None
            if kind is not None and kind != "async def":
                what = {"def": "a plain (not async) function", "class": "a class"}.get(
                    kind, f"a {kind}")
                why = f"it is {what}, and the loop awaits agent(client, record)"
        if why is not None:
            problems.append(
                ConfigProblem(
                    "rollout.agent_loop_options.agent",
                    f"the agent function {agent!r} cannot be used: {why}",
                    'name an async function as "package.module:function" that the rollout '
                    "workers can import: async def agent(client, record)",
                )
            )
    source = recipe.model.tokenizer or recipe.model.path
    if chat_template_missing(source):
        problems.append(
            ConfigProblem(
                "model.tokenizer" if recipe.model.tokenizer else "model.path",
                f"the openai_agent loop renders every request with the tokenizer's chat "
                f"template, and {source!r} has none",
                'use a chat model (an instruct checkpoint, or "tiny-chat" for the offline '
                "tiny one), or give a tokenizer that has a chat template",
            )
        )
    return problems


def chat_template_missing(source: str) -> bool:
    """Whether the tokenizer at ``source`` certainly has no chat template: the built-in
    ``tiny``, or a local directory without one (a hub id cannot be read here: not known)."""
    import json
    from pathlib import Path

    if source == "tiny":
        return True
    folder = Path(source)
    if not folder.is_dir():
        return False  # a missing directory is reported where the model is loaded
    if any((folder / name).is_file() for name in ("chat_template.jinja", "chat_template.json")):
        return False
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # no readable config: the tokenizer's loader reports it
    return not config.get("chat_template")
