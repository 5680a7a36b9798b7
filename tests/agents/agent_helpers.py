"""Helpers of the agent tests: recipes in code, a scripted policy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlctl.agents.contract import PromptRecord
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import Generation, SamplingParams
from rlctl.models.tiny import build_tiny_tokenizer
from rlctl.registry import get_registry
from rlctl.testing.agent_episode import ScriptedChatPolicy

TOK = build_tiny_tokenizer()


def ids(text: str) -> list[int]:
    """Tiny-tokenizer ids of ``text`` without ``<bos>`` (``<eos>`` spelt out)."""
    out: list[int] = []
    for part in text.split("<eos>"):
        out += TOK(part, add_special_tokens=False)["input_ids"]
        out.append(TOK.eos_token_id)
    return out[:-1]


def recipe(**rollout: Any) -> Recipe:
    base: dict[str, Any] = {
        "model": {"path": "tiny", "dtype": "float32"},
        "data": {"task": "count_digits"},  # any source: loops read only the records they get
        "rollout": {"max_new_tokens": 4, **rollout},
    }
    return Recipe.model_validate(base)


def build_loop(r: Recipe, tokenizer: Any = TOK) -> Any:
    """The recipe's agent loop as a rollout worker builds it (options validated at load)."""
    from rlctl.config.pipeline import validate_recipe
    from rlctl.trainer.worker.rollout_worker import build_agent_loop

    return build_agent_loop(validate_recipe(r), get_registry(), tokenizer)


def record(text: str = "12=", truth: Any = None, uid: str = "u1") -> PromptRecord:
    return PromptRecord(
        uid=uid,
        prompt_ids=TOK(text)["input_ids"],
        ground_truth=truth or {"ground_truth": "7", "secret": "7"},
        data_source="test",
        prompt=text,
    )


@dataclass
class ScriptedPolicy:
    """A deterministic policy: answers turn i with ``turns[i]`` (text), log-prob -0.5 a token.

    It records every request, so a test can check what the engine was given.
    """

    turns: list[str]
    version: int = 3
    requests: list[tuple[list[int], SamplingParams]] = field(default_factory=list)
    returned: list[list[int]] = field(default_factory=list)

    async def __call__(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        self.requests.append((list(prompt_ids), sampling))
        text = self.turns[min(len(self.requests) - 1, len(self.turns) - 1)]
        out = ids(text)[: sampling.max_new_tokens]
        stop = next(
            (i for i, t in enumerate(out) if t == TOK.eos_token_id or t in sampling.stop_token_ids),
            None,
        )
        out = out if stop is None else out[: stop + 1]
        self.returned.append(out)
        return Generation(
            out, [-0.5] * len(out), "stop" if stop is not None else "length", self.version
        )


TOOL_CALL = ('<think>\nI  should\n\nadd.  </think>\n\n<tool_call>\n'
             '{"name": "add", "arguments": {"a":2,"b":3}}\n</tool_call>')
ANSWER = "<think>\nadding   two\n numbers</think>\n\nThe sum is 5."


def call_then_answer(context: str) -> str:
    """A policy's choice: call ``add`` until a tool result is in the context, then answer."""
    return ANSWER if "<tool_response>" in context else TOOL_CALL


def chat_policy(tokenizer: Any, reply: Any = call_then_answer) -> ScriptedChatPolicy:
    """The tests' chat policy: :func:`call_then_answer` unless told otherwise."""
    return ScriptedChatPolicy(tokenizer, reply)
