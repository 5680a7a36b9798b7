"""The built-in ``single_turn`` agent loop: one generation per session."""

from __future__ import annotations

from typing import Any

from rlctl.agents.contract import (
    AgentLoop,
    AgentLoopSpec,
    AgentOutput,
    GenerateFn,
    GenerateManyFn,
    PromptRecord,
    SamplingParams,
    partial_fields,
)


class SingleTurnAgentLoop(AgentLoop):
    """One generation per session: the prompt in, one response out."""

    def __init__(self, spec: AgentLoopSpec | None = None) -> None:
        super().__init__(spec)  # type: ignore[arg-type]  # it reads nothing of it

    async def run(
        self, prompt: PromptRecord, session_id: int, sampling: SamplingParams, generate: GenerateFn
    ) -> list[AgentOutput]:
        return [self._output(prompt, await generate(prompt.prompt_ids, sampling))]

    async def run_batch(
        self,
        requests: list[tuple[PromptRecord, int]],
        sampling: SamplingParams,
        generate: GenerateFn,
        generate_many: GenerateManyFn,
        *,
        session_timeout_s: float,
    ) -> list[list[AgentOutput] | BaseException]:
        """The sessions ``(prompt, session_id)`` at once, in order: one ``run`` each, as one
        batched request to the engine (the worker's deadline for the call bounds them all:
        they start together)."""
        try:
            gens = await generate_many([rec.prompt_ids for rec, _ in requests], sampling)
        except Exception as exc:  # noqa: BLE001 - the batch failed: each session with it
            return [exc] * len(requests)
        return [gen if isinstance(gen, BaseException) else [self._output(rec, gen)]
                for (rec, _), gen in zip(requests, gens, strict=True)]

    @staticmethod
    def _output(prompt: PromptRecord, gen: Any) -> AgentOutput:
        return AgentOutput(
            prompt_ids=list(prompt.prompt_ids),
            response_ids=list(gen.token_ids),
            rollout_log_probs=list(gen.log_probs),
            finish_reason=gen.finish_reason,
            weight_version=gen.weight_version,
            **partial_fields(gen),
        )
