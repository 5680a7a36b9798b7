"""Agent frameworks nobody on this project wrote, driven through the ``openai_agent`` loop as
a user would: the OpenAI Agents SDK (its default Responses model, and chat completions),
LangChain + LangGraph's ReAct agent, pydantic-ai; each streaming and not.

The policy is scripted (:func:`~tests.agents.agent_helpers.chat_policy`: it calls ``add``,
reads the result, answers "The sum is 5." with ``<think>`` blocks a framework may rewrite), so
a tool call really happens; everything else is real: the framework, its HTTP client, the
gateway, the chat template. Each episode must be one output of two turns, token for token
the policy's turns and the rendered tool result.
"""

from __future__ import annotations

import asyncio

import pytest

import tests.agents.framework_agents as agents
from rlctl.agents.contract import EpisodeError, PromptRecord
from rlctl.agents.observation import chat_delta_ids
from rlctl.engines.rollout.contract import SamplingParams
from rlctl.models.loading import load_tokenizer
from tests.agents.agent_helpers import TOOL_CALL, build_loop, call_then_answer, chat_policy, recipe

FRAMEWORKS = {
    "openai-agents": ["agents_sdk_responses", "agents_sdk_responses_streamed",
                      "agents_sdk_chat", "agents_sdk_chat_streamed"],
    "langgraph": ["langgraph_react", "langgraph_react_streamed"],
    "pydantic_ai": ["pydantic_ai_agent", "pydantic_ai_streamed"],
}
MODULES = {"openai-agents": "agents", "langgraph": "langgraph.prebuilt",
           "pydantic_ai": "pydantic_ai"}
CASES = [pytest.param(package, name, id=name) for package, names in FRAMEWORKS.items()
         for name in names]


@pytest.fixture(scope="module")
def make(chat_model_dir):
    def _make(agent: str, reply=call_then_answer):
        r = recipe(agent_loop="openai_agent", max_new_tokens=160,
                   agent_loop_options={"agent": f"tests.agents.framework_agents:{agent}"})
        r = r.model_copy(update={"model": r.model.model_copy(update={"path": str(chat_model_dir)})})
        tok = load_tokenizer(r.model)
        return build_loop(r, tok), chat_policy(tok, reply), tok

    return _make


def episode(loop, policy):
    rec = PromptRecord("u1", [1, 2], {}, "test", prompt="what is 2+3?")
    return asyncio.run(loop.run(rec, 0, SamplingParams(160), policy))


@pytest.mark.parametrize(("package", "agent"), CASES)
def test_a_framework_episode_is_one_output_of_the_policys_tokens(make, package, agent):
    pytest.importorskip(MODULES[package])
    reply = call_then_answer
    if agent == "pydantic_ai_streamed":
        # run_stream ends at the first text it streams (pydantic-ai's rule): text before the
        # call (a <think> block) would end the run there, as it would with vLLM
        def reply(context):
            answer = call_then_answer(context)
            return answer.split("</think>\n\n", 1)[1] if answer == TOOL_CALL else answer

    loop, policy, tok = make(agent, reply)
    [out] = episode(loop, policy)
    assert out.extra["agent_reward"] == 1.0 and "5" in str(agents.RESULTS[-1])
    gen1, gen2 = policy.returned
    obs = chat_delta_ids(tok, [{"role": "tool", "tool_call_id": "x", "content": "5"}])
    assert out.response_ids == gen1 + obs + gen2
    assert out.loss_mask == [1] * len(gen1) + [0] * len(obs) + [1] * len(gen2)
    assert out.num_turns == 2 and out.metrics["episode_errors"] == 0
    assert out.metrics["refused_requests"] == 0


def test_a_framework_that_raises_scores_the_episode_zero_with_its_turns(make):
    pytest.importorskip("agents")
    loop, policy, _ = make("agents_sdk_one_turn")
    with pytest.raises(EpisodeError, match="MaxTurnsExceeded") as err:
        episode(loop, policy)
    [out] = err.value.outputs
    assert out.num_turns == 1 and out.response_ids == policy.returned[0]
    assert err.value.metrics["episode_errors"] == 1


def test_pydantic_ais_typed_output_is_a_forced_call_of_its_output_tool(make):
    pytest.importorskip("pydantic_ai")

    def reply(context):  # the turn starts with the call's opening: the policy completes it
        assert context.endswith("<tool_call>\n")
        return '{"name": "final_result", "arguments": {"response": 5}}\n</tool_call>'

    loop, policy, tok = make("pydantic_ai_typed", reply)
    [out] = episode(loop, policy)
    assert agents.RESULTS[-1] == 5 and out.extra["agent_reward"] == 1.0
    opening = tok("<tool_call>\n", add_special_tokens=False)["input_ids"]
    assert out.response_ids == opening + policy.returned[0]
    assert out.loss_mask == [0] * len(opening) + [1] * len(policy.returned[0])
