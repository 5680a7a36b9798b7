"""The ``tool`` agent loop: generate, run the tool calls, append their results, repeat.

Each turn generates from the trajectory's own tokens (prompt + everything so far). A turn
without a tool call is the final answer and ends the session; a turn with calls is answered
by running them (each under ``tool_timeout_s``) and appending the rendered results as
observation tokens (loss mask 0). Limits: ``max_turns`` generation turns, ``max_total_tokens``
response tokens per output (generated + observed; an observation that would not leave room
to answer is not appended, so an output never ends on an observation). Reward functions
score the last turn; a session whose last turn is a call left unanswered (``max_turns``)
has no answer, and they score an empty one.

Many outputs per session: with ``new_output_at_tokens``, when the context would grow past
that many tokens the current output is closed and a new one starts from the prompt plus the
latest turn and its results (earlier turns dropped: a sliding-window context). Every output
of the session gets the session's final score (see docs/agents.md).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Literal

from pydantic import BaseModel, PositiveFloat, PositiveInt

from rlctl.agents.contract import AgentLoop, AgentLoopSpec, AgentOutput, GenerateFn, PromptRecord
from rlctl.agents.tools import CallLimits, ToolContext, ToolRunner
from rlctl.agents.trajectory import Trajectory
from rlctl.config.strict import STRICT_CONFIG
from rlctl.engines.rollout.contract import SamplingParams

DEFAULT_PARSER = "hermes"
MAX_NOTES = 3  # failed calls of one session shown to the user (all are counted)


class ToolLoopOptions(BaseModel):
    """Options of the ``tool`` agent loop (``[rollout] agent_loop_options``)."""

    model_config = STRICT_CONFIG

    max_turns: PositiveInt = 4
    """Most generation turns per session; a call in the last turn is left unanswered."""
    max_total_tokens: PositiveInt = 4096
    """Most response tokens (generated + observations) in one output."""
    tool_timeout_s: PositiveFloat = 30.0
    """Seconds one tool call may take; a slower call is cut off and answered with an error."""
    on_tool_error: Literal["observe", "fail"] = "observe"
    """A raising or hung tool: ``observe`` = the model reads the error, ``fail`` = the session
    fails."""
    tool_threads: PositiveInt = 16
    """Threads of each synchronous tool per rollout worker (its calls beyond wait for one,
    within ``tool_timeout_s``); when all are held by calls that never returned, the sessions
    that call it fail, naming it."""
    max_parallel_calls: PositiveInt = 4
    """Calls of one turn that are run; further calls in the same turn are ignored."""
    max_result_chars: PositiveInt = 4000
    """Tool results longer than this are truncated."""
    new_output_at_tokens: PositiveInt | None = None
    """Context budget: past it a new output starts from the prompt + the latest turn
    (``None`` = off)."""


class ToolAgentLoop(AgentLoop):
    """Multi-turn tool use (see the module docstring)."""

    def __init__(self, spec: AgentLoopSpec) -> None:
        super().__init__(spec)
        registry = spec.registry
        self.options = spec.options_as(ToolLoopOptions)
        self.tokenizer = spec.tokenizer
        if not spec.tools:
            raise ValueError("the tool agent loop needs tools: add [[rollout.tools]] to the recipe")
        self.runner = ToolRunner.build(spec.tools, registry, threads=self.options.tool_threads)
        self.limits = CallLimits(self.options.tool_timeout_s, self.options.on_tool_error,
                                 self.options.max_result_chars)
        self.parser = registry.load("tool_parser", spec.tool_parser or DEFAULT_PARSER)(
            self.tokenizer)
        self.names = list(self.runner.tools)

    async def run(
        self, prompt: PromptRecord, session_id: int, sampling: SamplingParams, generate: GenerateFn
    ) -> list[AgentOutput]:
        o = self.options
        ctx = ToolContext(prompt, session_id)
        stops = tuple(dict.fromkeys((*sampling.stop_token_ids, *self.parser.stop_token_ids)))
        outputs: list[AgentOutput] = []
        traj = Trajectory(list(prompt.prompt_ids))
        counts = {"tool_calls": 0.0, "tool_errors": 0.0, "tool_timeouts": 0.0}
        notes: list[str] = []  # the failed calls, for the user (the model reads its own text)
        finish: str | None = None
        for turn in range(o.max_turns):
            budget = o.max_total_tokens - traj.response_tokens
            if budget <= 0:
                finish = "length"
                break
            turn_sampling = replace(
                sampling, max_new_tokens=min(sampling.max_new_tokens, budget), stop_token_ids=stops
            )
            traj.add_generation(await generate(traj.context, turn_sampling))
            text = self.tokenizer.decode(traj.last_turn_ids, skip_special_tokens=False)
            _, calls = self.parser.parse(text, self.names)
            if not calls:
                break  # the final answer
            if turn == o.max_turns - 1:
                finish = "max_turns"
                break
            calls = calls[: o.max_parallel_calls]
            results = await asyncio.gather(
                *(self.runner.run(call, ctx, self.limits) for call in calls))
            notes += [r.error for r in results if r.error is not None]
            counts["tool_calls"] += len(results)
            counts["tool_errors"] += sum(not r.ok for r in results)
            counts["tool_timeouts"] += sum(r.timed_out for r in results)
            obs = self.parser.render_results(results)
            if traj.response_tokens + len(obs) >= o.max_total_tokens:
                finish = "length"  # no room left to answer: end on the model's own turn
                break
            if (
                o.new_output_at_tokens is not None
                and len(traj.context) + len(obs) > o.new_output_at_tokens
            ):
                outputs.append(traj.to_output(reward_ids=traj.last_turn_ids))
                # the new context: the prompt, then the latest turn and its results
                traj = Trajectory(list(prompt.prompt_ids) + traj.last_turn_ids + obs)
                continue
            traj.add_observation(obs)
        if traj.turns == 0:  # a new context that had no room to generate: nothing to add
            if not outputs:
                raise RuntimeError("the tool loop produced no turn")
        else:
            # A session cut off with a call still pending has no final answer to score.
            answer = [] if finish == "max_turns" else traj.last_turn_ids
            outputs.append(traj.to_output(reward_ids=answer, finish_reason=finish))
        metrics = dict(
            counts, turns=float(sum(out.num_turns for out in outputs)), outputs=float(len(outputs))
        )
        for out in outputs:
            out.metrics = metrics
            out.extra.update(counts)  # reward functions may read the tool use
        outputs[-1].notes = notes[:MAX_NOTES]
        return outputs
