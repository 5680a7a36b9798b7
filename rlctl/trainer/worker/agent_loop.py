"""Agent loops: how one prompt session turns into outputs.

A session is one of the ``n`` samples of a prompt (``session_id`` in [0, n)). A loop may
emit several outputs per session (multi-turn tools, critiques...), numbered by ``index``;
each output lands in the data plane under ``{uid}_{session_id}_{index}``.
The built-in ``single_turn`` loop makes one generation call and emits one output.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlctl.engines.rollout.contract import SamplingParams


@dataclass(frozen=True)
class PromptRecord:
    """One prompt as an agent loop sees it (read from the data plane by the worker)."""

    uid: str
    prompt_ids: list[int]
    ground_truth: Any
    data_source: str


@dataclass
class AgentOutput:
    """One output of a session: token ids in, token ids and log-probs out."""

    prompt_ids: list[int]
    response_ids: list[int]
    rollout_log_probs: list[float]
    finish_reason: str
    weight_version: int
    num_turns: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


# generate(prompt_ids, sampling) -> Generation (token_ids, log_probs, finish_reason, weight_version)
GenerateFn = Callable[[list[int], SamplingParams], Awaitable[Any]]


class AgentLoop(Protocol):
    """What a registered agent loop implements (one instance per rollout worker)."""

    async def run(
        self, prompt: PromptRecord, session_id: int, sampling: SamplingParams, generate: GenerateFn
    ) -> list[AgentOutput]:
        """Produce the outputs of one session; raising marks the session as ``failure``."""
        ...


class SingleTurnAgentLoop:
    """One generation per session: the prompt in, one response out."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = options or {}

    async def run(
        self, prompt: PromptRecord, session_id: int, sampling: SamplingParams, generate: GenerateFn
    ) -> list[AgentOutput]:
        gen = await generate(prompt.prompt_ids, sampling)
        return [
            AgentOutput(
                prompt_ids=list(prompt.prompt_ids),
                response_ids=list(gen.token_ids),
                rollout_log_probs=list(gen.log_probs),
                finish_reason=gen.finish_reason,
                weight_version=gen.weight_version,
            )
        ]
