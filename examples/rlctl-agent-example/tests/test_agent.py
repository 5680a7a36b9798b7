"""The example agent, one episode at a time, against rlctl's gateway and a scripted policy."""

from __future__ import annotations

import json

from rlctl.models.tiny_chat import build_chat_tokenizer
from rlctl.testing.agent_episode import run_episode


def test_the_agent_asks_the_prompt_and_its_answer_is_the_last_completion():
    [output] = run_episode("rlctl_agent_example.agent:solve", "4821=", lambda context: "4")
    prompt = build_chat_tokenizer().decode(output.prompt_ids)
    assert "Answer with the number only." in prompt and "4821=" in prompt
    assert output.num_turns == 1
    assert output.reward_ids == output.response_ids  # the answer the rewards score


def test_the_tool_agent_calls_the_tool_and_scores_its_answer():
    def policy(context: str) -> str:
        if "<tool_response>" in context:  # the tool's result is in: answer with it
            return context.rsplit("<tool_response>\n", 1)[1].split("\n", 1)[0]
        call = {"name": "count_digits", "arguments": {"text": "4821="}}
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"

    [output] = run_episode("rlctl_agent_example.agent:solve_with_tool", "4821=", policy,
                           ground_truth={"ground_truth": "4"})
    assert output.num_turns == 2 and output.extra["agent_reward"] == 1.0
