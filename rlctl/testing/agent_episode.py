"""Run an ``openai_agent`` agent function for one episode, offline, against a scripted policy.

For authors of agent functions: the real ``openai_agent`` loop and gateway (the same HTTP
routes, chat template and token bookkeeping a training run uses), the offline ``tiny-chat``
tokenizer, and a :class:`ScriptedChatPolicy` in place of the model, so a test decides what the
model says and checks what the agent does with it::

    from rlctl.testing.agent_episode import run_episode

    def policy(context: str) -> str:          # the conversation so far, as the model reads it
        return "4"

    [output] = run_episode("my_package.agents:solve", "4821=", policy, ground_truth="4")
    assert output.extra["agent_reward"] == 1.0

An episode that fails raises :class:`rlctl.agents.contract.EpisodeError` (with the turns it
recorded), as the rollout worker would score it 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlctl.agents.contract import AgentOutput, PromptRecord
from rlctl.engines.rollout.contract import Generation, SamplingParams


@dataclass
class ScriptedChatPolicy:
    """A deterministic chat policy: ``reply(context)`` is the turn's text, where ``context``
    is the conversation so far decoded with special tokens (it ends with the generation
    prompt, ``<|im_start|>assistant\\n`` for ChatML); the turn is that text's tokens then eos,
    cut at ``max_new_tokens`` or a stop token, with log-prob ``log_prob`` per token. Every
    request and turn is kept (:attr:`requests`, :attr:`returned`) for tests to check."""

    tokenizer: Any
    reply: Callable[[str], str]
    version: int = 0
    log_prob: float = -0.25
    requests: list[tuple[list[int], SamplingParams]] = field(default_factory=list)
    returned: list[list[int]] = field(default_factory=list)

    async def __call__(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        self.requests.append((list(prompt_ids), sampling))
        text = self.reply(self.tokenizer.decode(prompt_ids, skip_special_tokens=False))
        out = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        out = [*out, self.tokenizer.eos_token_id][: sampling.max_new_tokens]
        stops = {self.tokenizer.eos_token_id, *sampling.stop_token_ids}
        stop = next((i for i, t in enumerate(out) if t in stops), None)
        out = out if stop is None else out[: stop + 1]
        self.returned.append(out)
        return Generation(out, [self.log_prob] * len(out),
                          "length" if stop is None else "stop", self.version)


def run_episode(
    agent: str,
    prompt: Any,
    reply: Callable[[str], str] | ScriptedChatPolicy,
    *,
    ground_truth: Any = None,
    data_source: str = "test",
    max_new_tokens: int = 256,
    session_id: int = 0,
    **options: Any,
) -> list[AgentOutput]:
    """One episode of the agent function ``agent`` (``"package.module:function"``) on
    ``prompt`` (text or chat messages), the model played by ``reply``; ``options`` are
    further ``agent_loop_options`` (``max_turns``, ``on_episode_error``...). Returns the
    episode's outputs, as the rollout worker would write them."""
    from rlctl.config.pipeline import validate_recipe
    from rlctl.config.recipe import Recipe
    from rlctl.models.loading import load_tokenizer
    from rlctl.registry import get_registry
    from rlctl.trainer.worker.rollout_worker import build_agent_loop

    recipe = Recipe.model_validate({
        "model": {"path": "tiny-chat", "dtype": "float32",
                  "tiny": {"max_position_embeddings": 8192}},
        "data": {"task": "count_digits"},
        "rollout": {"agent_loop": "openai_agent", "max_new_tokens": max_new_tokens,
                    "agent_loop_options": {"agent": agent, **options}},
    })
    tokenizer = load_tokenizer(recipe.model)
    loop = build_agent_loop(validate_recipe(recipe), get_registry(), tokenizer)
    policy = reply if isinstance(reply, ScriptedChatPolicy) else ScriptedChatPolicy(
        tokenizer, reply)
    record = PromptRecord("episode", [tokenizer.eos_token_id], ground_truth, data_source,
                          prompt=prompt)
    return asyncio.run(loop.run(record, session_id, SamplingParams(max_new_tokens), policy))
