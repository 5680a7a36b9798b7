"""The tool agent loop: token in / token out, loss masks, limits, failures, many outputs."""

from __future__ import annotations

import asyncio
import time

import pytest

from rlctl.agents.tools import ToolFailure
from rlctl.hookspecs import hookimpl
from rlctl.registry import build_registry, set_registry
from tests.agents.agent_helpers import TOK, ScriptedPolicy, build_loop, ids, recipe, record

LOOKUP = {"agent_loop": "tool", "tool_parser": "compact", "tools": [{"name": "lookup"}]}


def run(loop, policy, rec=None, max_new_tokens=4):
    from rlctl.engines.rollout.contract import SamplingParams

    return asyncio.run(loop.run(rec or record(), 0, SamplingParams(max_new_tokens), policy))


def test_a_call_its_result_and_the_answer_make_one_output_with_its_masks():
    loop = build_loop(recipe(**LOOKUP, agent_loop_options={"max_turns": 3}))
    policy = ScriptedPolicy(["#", "7<eos>"])
    [out] = run(loop, policy)
    assert out.response_ids == ids("#") + ids("7") + ids("7<eos>")
    assert out.loss_mask == [1, 0, 1, 1]
    assert out.rollout_log_probs == [-0.5, 0.0, -0.5, -0.5]
    assert out.reward_ids == ids("7<eos>")  # rewards score the final answer
    assert out.num_turns == 2 and out.weight_version == 3 and out.finish_reason == "stop"
    assert out.metrics["tool_calls"] == 1 and out.metrics["tool_errors"] == 0


def test_each_turn_is_generated_from_the_trajectorys_own_tokens():
    loop = build_loop(recipe(**LOOKUP, agent_loop_options={"max_turns": 3}))
    policy = ScriptedPolicy(["#", "7<eos>"])
    [out] = run(loop, policy)
    (first, s1), (second, _) = policy.requests
    assert first == out.prompt_ids
    # turn 2 sees exactly prompt + turn 1 as generated + the observation: nothing re-tokenized
    assert second == out.prompt_ids + policy.returned[0] + ids("7")
    assert out.prompt_ids + out.response_ids == second + policy.returned[1]
    assert TOK.convert_tokens_to_ids("#") in s1.stop_token_ids  # the call ends the turn


def test_max_turns_leaves_the_last_call_unanswered():
    loop = build_loop(recipe(**LOOKUP, agent_loop_options={"max_turns": 2}))
    [out] = run(loop, ScriptedPolicy(["#", "#", "7<eos>"]))
    assert out.num_turns == 2 and out.finish_reason == "max_turns"
    assert out.loss_mask == [1, 0, 1]  # ends on the model's turn, never on an observation
    assert out.reward_ids == []  # a pending call is no answer


def test_max_total_tokens_caps_the_turn_and_never_ends_on_an_observation():
    loop = build_loop(recipe(**LOOKUP, agent_loop_options={"max_turns": 5, "max_total_tokens": 3}))
    policy = ScriptedPolicy(["#", "#", "#"])
    [out] = run(loop, policy)
    assert len(out.response_ids) <= 3 and out.loss_mask[-1] == 1
    # the second turn may only generate what is left of the budget
    assert [s.max_new_tokens for _, s in policy.requests] == [3, 1]


class _Slow:
    name = "slow"

    def schema(self):
        return {"type": "function", "function": {"name": "slow", "parameters": {}}}

    async def call(self, arguments, ctx):
        await asyncio.sleep(60)


class _Broken(_Slow):
    name = "broken"

    async def call(self, arguments, ctx):
        raise ConnectionError("sandbox unreachable")


@pytest.fixture
def odd_tools():
    import types

    module = types.ModuleType("rlctl_test_odd_tools")

    @hookimpl
    def register_tools(register):
        register("slow", lambda options: _Slow())
        register("broken", lambda options: _Broken())

    module.register_tools = register_tools
    set_registry(build_registry(extra=[module]))
    yield
    set_registry(None)


def test_a_hung_tool_is_cut_off_and_answered_with_an_error(odd_tools):
    r = recipe(
        agent_loop="tool",
        tool_parser="compact",
        tools=[{"name": "slow"}],
        agent_loop_options={"max_turns": 2, "tool_timeout_s": 0.2},
    )
    started = time.monotonic()
    [out] = run(build_loop(r), ScriptedPolicy(["#", "1<eos>"]))
    assert time.monotonic() - started < 5
    assert out.metrics["tool_timeouts"] == 1 and out.metrics["tool_errors"] == 1
    assert out.response_ids[1:2] == ids("?")  # the compact format's error observation


def test_a_raising_tool_gives_an_error_observation_or_fails_the_session(odd_tools):
    tools = [{"name": "broken"}]
    observe = recipe(
        agent_loop="tool", tool_parser="compact", tools=tools, agent_loop_options={"max_turns": 2}
    )
    [out] = run(build_loop(observe), ScriptedPolicy(["#", "1<eos>"]))
    assert out.metrics["tool_errors"] == 1 and out.num_turns == 2
    fail = recipe(
        agent_loop="tool",
        tool_parser="compact",
        tools=tools,
        agent_loop_options={"max_turns": 2, "on_tool_error": "fail"},
    )
    with pytest.raises(ToolFailure, match="sandbox unreachable"):
        run(build_loop(fail), ScriptedPolicy(["#", "1<eos>"]))


def test_a_context_past_its_budget_starts_a_new_output_of_the_session():
    r = recipe(**LOOKUP, agent_loop_options={"max_turns": 4, "new_output_at_tokens": 8})
    policy = ScriptedPolicy(["1#", "2#", "7<eos>"])
    outs = run(build_loop(r), policy)
    prompt = record().prompt_ids  # <bos>12= : 4 tokens
    assert len(outs) == 2
    first, second = outs
    # 4 + "1#" + "7" = 7 tokens fit; with "2#" and its result (10) the context is past 8
    assert first.prompt_ids == prompt and first.response_ids == ids("1#72#")
    assert first.loss_mask == [1, 1, 0, 1, 1]
    # the new context: the prompt, the latest turn and its result; earlier turns dropped
    assert second.prompt_ids == prompt + ids("2#") + ids("7")
    assert second.response_ids == ids("7<eos>") and second.loss_mask == [1, 1]
    assert policy.requests[2][0] == second.prompt_ids
    assert all(o.metrics["outputs"] == 2 for o in outs)


def test_the_hermes_loop_renders_results_with_the_chat_template(chat_model_dir):
    from rlctl.models.loading import load_tokenizer

    r = recipe(
        agent_loop="tool", tools=[{"name": "calculator"}], agent_loop_options={"max_turns": 3}
    )
    r = r.model_copy(update={"model": r.model.model_copy(update={"path": str(chat_model_dir)})})
    tok = load_tokenizer(r.model)
    loop = build_loop(r, tok)
    call = (
        '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}'
        "</tool_call><|im_end|>"
    )

    def enc(s):
        return tok(s, add_special_tokens=False)["input_ids"]

    turns = [enc(call), enc("42<|im_end|>")]

    async def policy(prompt_ids, sampling):
        from rlctl.engines.rollout.contract import Generation

        out = turns.pop(0)
        return Generation(out, [-1.0] * len(out), "stop", 0)

    from rlctl.engines.rollout.contract import SamplingParams

    rec = record()
    [out] = asyncio.run(loop.run(rec, 0, SamplingParams(64), policy))
    text = tok.decode(out.response_ids)
    assert text == (
        call + "\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n42<|im_end|>"
    )
    generated = [t for t, m in zip(out.response_ids, out.loss_mask, strict=True) if m]
    assert generated == enc(call) + enc("42<|im_end|>")
