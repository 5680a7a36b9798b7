"""The agent: an OpenAI Agents SDK ``Agent`` that answers a digit puzzle, optionally with a tool.

rlctl calls :func:`solve` once per episode with an ``openai.AsyncOpenAI`` client bound to the
episode's session of its gateway, and the prompt's record. Everything the model says goes
through that client, so rlctl records the policy's own tokens and log-probs for training;
the function's code is ordinary Agents SDK code.
"""

from __future__ import annotations

from typing import Any

from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)

# The SDK exports traces to api.openai.com by default; a training run has no business there.
set_tracing_disabled(True)

INSTRUCTIONS = "Answer with the number only."


@function_tool
def count_digits(text: str) -> int:
    """How many digits ``text`` has."""
    return sum(ch.isdigit() for ch in text)


def build_agent(client: Any, *, with_tool: bool = False) -> Agent:
    """The agent on the episode's client. Chat completions, not the SDK's default Responses
    model: a reply cut by the token limit is a normal (if poor) answer there, while the
    Responses API calls it ``incomplete`` and the SDK raises (the episode would score 0)."""
    return Agent(
        name="digit-counter",
        instructions=INSTRUCTIONS,
        tools=[count_digits] if with_tool else [],
        model=OpenAIChatCompletionsModel(model="policy", openai_client=client),
        model_settings=ModelSettings(parallel_tool_calls=False),
    )


async def solve(client: Any, record: Any) -> None:
    """One episode: the task's prompt in, the agent's answer out.

    Returns nothing: the recipe's reward functions score the last completion (return a
    number instead and use the ``agent_reward`` reward to score with the agent's own check).
    A framework error (its turn limit, an unknown tool) propagates: rlctl scores the episode
    0 and counts it (``agent_loop_options.on_episode_error``).
    """
    await Runner.run(build_agent(client), str(record.prompt), max_turns=3)


async def solve_with_tool(client: Any, record: Any) -> float:
    """The same puzzle with the ``count_digits`` tool offered; scores itself: 1.0 when the
    final answer is the right count."""
    result = await Runner.run(build_agent(client, with_tool=True), str(record.prompt),
                              max_turns=4)
    truth = record.ground_truth
    expected = str(truth.get("ground_truth") if isinstance(truth, dict) else truth)
    return 1.0 if str(result.final_output).strip() == expected else 0.0
