"""Tools (calculator, lookup, call limits) and tool-call parsers (hermes, compact)."""

from __future__ import annotations

import asyncio

import pytest

from rlctl.agents.builtin_tools import Calculator, Lookup
from rlctl.agents.tool_parsers import CompactToolParser, HermesToolParser
from rlctl.agents.tools import (
    CallLimits,
    ToolCall,
    ToolContext,
    ToolFailure,
    ToolResult,
    ToolRunner,
)
from tests.agents.agent_helpers import TOK, ids, record


def call(tool, args):
    runner = ToolRunner({tool.name: tool}, {}, threads=2)
    return asyncio.run(runner.run(ToolCall(tool.name, args), ToolContext(record(), 0),
                                  CallLimits(timeout_s=5, on_error="observe", max_chars=50)))


@pytest.mark.parametrize(
    ("expr", "want"), [("6*7", "42"), ("(1+2)/4", "0.75"), ("-2**3", "-8"), ("7//2 + 7%2", "4")]
)
def test_calculator_computes_arithmetic(expr, want):
    assert call(Calculator(), {"expression": expr}) == ToolResult("calculator", want)


@pytest.mark.parametrize("expr", ["__import__('os')", "a+1", "9**9**9", "1/0", ""])
def test_calculator_refuses_what_is_not_safe_arithmetic(expr):
    result = call(Calculator(), {"expression": expr})
    assert not result.ok and result.text.startswith("error: ")


def test_lookup_answers_with_the_prompts_hidden_value_and_long_results_are_cut():
    assert call(Lookup(), {}).text == "7"

    class Chatty(Lookup):
        name = "chatty"

        async def call(self, arguments, ctx):
            return "x" * 100

    assert call(Chatty(), {}).text == "x" * 50 + "...(truncated)"


def test_unknown_tools_and_unreadable_calls_are_answered_or_fail_by_option():
    runner = ToolRunner({"lookup": Lookup()}, {}, threads=2)
    ctx = ToolContext(record(), 0)
    res = asyncio.run(runner.run(ToolCall("nope", {}), ctx, CallLimits(1, "observe", 99)))
    assert not res.ok and "no tool named 'nope'" in res.text
    assert res.error is None  # the model's own mistake: it reads it, the user is not told
    with pytest.raises(ToolFailure, match="bad json"):
        asyncio.run(runner.run(ToolCall("?", {}, error="bad json"), ctx,
                               CallLimits(1, "fail", 99)))


def test_hermes_reads_calls_content_and_broken_json():
    parser = HermesToolParser(TOK)
    text = (
        'I will compute. <tool_call>\n{"name": "calculator", "arguments": {"expression": "1+1"}}'
        '\n</tool_call><tool_call>{"name": "lookup", "arguments": "{\\"input\\": \\"a\\"}"}'
        "</tool_call><tool_call>{oops}</tool_call>"
    )
    content, calls = parser.parse(text, ["calculator", "lookup"])
    assert content == "I will compute."
    assert calls[0] == ToolCall("calculator", {"expression": "1+1"})
    assert calls[1] == ToolCall("lookup", {"input": "a"})  # double-encoded arguments
    assert calls[2].error is not None and "unreadable" in calls[2].error
    assert parser.parse("no calls here", ["lookup"]) == ("no calls here", [])
    assert parser.stop_token_ids == ()


def test_hermes_results_without_a_chat_template_are_tool_response_blocks():
    out = HermesToolParser(TOK).render_results([ToolResult("calculator", "2")])
    assert (
        out
        == TOK("\n<tool_response>\n2\n</tool_response>\n", add_special_tokens=False)["input_ids"]
    )


def test_compact_calls_the_one_tool_and_stops_at_the_call():
    parser = CompactToolParser(TOK)
    assert parser.stop_token_ids == (TOK.convert_tokens_to_ids("#"),)
    assert parser.parse("12#", ["lookup"]) == ("", [ToolCall("lookup", {"input": "12"})])
    assert parser.parse("#", ["lookup"]) == ("", [ToolCall("lookup", {})])
    assert parser.parse("5<eos>", ["lookup"]) == ("5<eos>", [])
    assert parser.render_results(
        [ToolResult("lookup", "7"), ToolResult("lookup", "x", ok=False)]
    ) == ids("7?")
    with pytest.raises(ValueError, match="one tool"):
        parser.parse("#", ["a", "b"])


def test_chat_deltas_start_after_the_assistants_eos(chat_model_dir):
    from transformers import AutoTokenizer

    from rlctl.agents.observation import chat_delta_ids

    tok = AutoTokenizer.from_pretrained(chat_model_dir)
    delta = chat_delta_ids(tok, [{"role": "user", "content": "higher"}])
    assert tok.decode(delta) == "\n<|im_start|>user\nhigher<|im_end|>\n<|im_start|>assistant\n"
    # appended to a rendered conversation it gives exactly the full rendering
    conv = [{"role": "user", "content": "guess"}, {"role": "assistant", "content": "5"}]
    head = tok.apply_chat_template(conv, tokenize=False)
    full = tok.apply_chat_template(
        conv + [{"role": "user", "content": "higher"}], tokenize=False, add_generation_prompt=True
    )
    assert head.rstrip("\n") + tok.decode(delta) == full


def test_prompts_render_the_tool_schemas_through_the_chat_template(chat_model_dir, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rlctl.agents.contract import tool_choices
    from rlctl.agents.tools import build_tools
    from rlctl.config.pipeline import validate_recipe
    from rlctl.config.recipe import Recipe
    from rlctl.dataplane.memory import MemoryDataPlane
    from rlctl.models.loading import load_tokenizer
    from rlctl.registry import get_registry
    from rlctl.trainer.controller.prompts import PromptFeeder

    path = tmp_path / "train.parquet"
    pq.write_table(
        pa.table(
            {
                "prompt": [[{"role": "user", "content": "6*7?"}]],
                "reward_model": [{"ground_truth": "42"}],
            }
        ),
        path,
    )
    recipe = Recipe.model_validate(
        {
            "model": {"path": str(chat_model_dir)},
            "data": {"train": str(path)},
            "rollout": {"agent_loop": "tool", "tools": [{"name": "calculator"}]},
            "rewards": [{"name": "gsm8k"}],
        }
    )
    tok = load_tokenizer(recipe.model)
    plane = MemoryDataPlane()
    loaded = validate_recipe(recipe)
    tools = build_tools(tool_choices(loaded), get_registry())
    feeder = PromptFeeder(recipe, tok, plane, task_options=None,
                          tool_schemas=[t.schema() for t in tools.values()])
    meta = feeder.next_batch(1, partition="train", global_step=1, n=2)
    td = plane.kv_batch_get(list(meta.keys), meta.partition_id, ["prompt_ids"])
    text = tok.decode(td["prompt_ids"].unbind()[0].tolist())
    assert text.startswith('<|im_start|>system\n# Tools\n{"type": "function"')
    assert '"name": "calculator"' in text and text.endswith(
        "6*7?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_agent_rewards_read_what_the_loops_recorded():
    from rlctl.plugins.agent_loops import agent_reward
    from rlctl.plugins.environments import env_reward
    from rlctl.plugins.tools import tool_answer_match
    from rlctl.rewards.base import RewardInput

    def sample(text, **extra):
        return RewardInput("q", text, (), {"ground_truth": "7"}, "t", extra=extra)

    assert tool_answer_match(sample("7", tool_calls=1.0, tool_errors=0.0))["score"] == 1.0
    assert tool_answer_match(sample("7"))["score"] == 0.0  # a lucky guess, no lookup
    assert tool_answer_match(sample("7", tool_calls=1.0, tool_errors=1.0))["score"] == 0.0
    assert env_reward(sample("", env_reward=0.75)) == 0.75
    assert agent_reward(sample("", agent_reward=2.0)) == 2.0
    with pytest.raises(KeyError, match="env agent loop"):
        env_reward(sample(""))
