"""The sessions of one ``RolloutWorker.generate`` call: run, score, and write to the data plane.

The agent loop's ``run_batch`` runs the call's sessions (by default concurrently on one event
loop, each bounded by ``schedule.sample_timeout_s``; the single-turn loop as one batched
generate); a session that raises becomes a ``failure`` output of its uid. Scored outputs are
written in batches (one ``kv_batch_put`` per flush) with their tags.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from dataclasses import dataclass
from typing import Any

from rlctl.agents.contract import AgentOutput, EpisodeError, PromptRecord, SamplingParams
from rlctl.protocol.kv import make_key
from rlctl.registry import get_registry
from rlctl.trainer.worker.fields import from_rows
from rlctl.trainer.worker.reward_sections import reward_fields
from rlctl.trainer.worker.sessions import NOTE_CHARS, is_reward_component

log = logging.getLogger(__name__)

# The call's backstop fires this long after the sessions' own bounds: those fire first.
BACKSTOP_S = 1.0


@dataclass
class _Scored:
    """One output with its reward, waiting to be written."""

    key: str
    uid: str
    out: AgentOutput
    score: float
    parts: dict[str, float]
    error: str | None = None
    """The episode failed and was scored 0 (:class:`EpisodeError`): why."""


class StepRollout:
    """The sessions of one ``generate`` call, run concurrently on one event loop."""

    def __init__(
        self, worker: Any, partition: str, global_step: int, sampling: SamplingParams
    ) -> None:
        # worker: the RolloutWorker running this call (its engine, rewards, plane, tokenizer);
        # not imported by name, which would make an import circle with rollout_worker.py
        self.worker = worker
        self.partition = partition
        self.global_step = global_step
        self.sampling = sampling
        self._buffer: list[_Scored] = []
        self._prompt_texts: dict[str, str] = {}  # uid -> decoded prompt, shared by its group
        self._flushing: asyncio.Future | None = None
        self._episode_errors: list[str] = []  # sessions scored 0 by their loop's policy

    async def run_all(
        self, records: list[PromptRecord], n_per_prompt: list[int]
    ) -> dict[str, float]:
        """Every session of the call through the agent loop's ``run_batch``, then each
        prompt's group scored and written."""
        pairs = list(zip(records, n_per_prompt, strict=True))
        requests = [(rec, s) for rec, n in pairs for s in range(n)]
        bound = self.worker.recipe.schedule.sample_timeout_s
        # The loop bounds each session; this deadline (the sessions all start now) is the
        # backstop of a loop that runs them as one batch: past it each becomes the
        # ``failure`` a lone session would.
        deadline = asyncio.timeout(bound + BACKSTOP_S)
        results: list[Any]
        try:
            async with deadline:
                results = await self.worker.agent_loop.run_batch(
                    requests, self.sampling, self._generate, self._generate_many,
                    session_timeout_s=bound)
        except TimeoutError:
            if not deadline.expired():
                raise
            results = [TimeoutError(
                f"session {s} of prompt {rec.uid} ran past schedule.sample_timeout_s "
                f"= {bound:g} s and was cancelled") for rec, s in requests]
        groups: list[list[Any]] = []
        start = 0
        for _, n in pairs:
            groups.append(results[start : start + n])
            start += n
        # together: their outputs land in one flush of the data-plane writes
        counts = await asyncio.gather(
            *(self._finish_group(rec, group) for (rec, _), group in zip(pairs, groups,
                                                                         strict=True)))
        if self._episode_errors:  # one line per call, not one per episode
            log.warning("%d episode(s) failed and were scored 0 (the agent loop's "
                        "on_episode_error); the first: %s", len(self._episode_errors),
                        self._episode_errors[0])
        return {
            "outputs": float(sum(c[0] for c in counts)),
            "failures": float(sum(c[1] for c in counts)),
        }

    async def _finish_group(self, rec: PromptRecord, sessions: list[Any]) -> tuple[int, int]:
        """Score and write the sessions of one prompt (outputs, or the exception a session
        raised: a ``failure`` sample naming it)."""
        outputs: list[_Scored] = []
        failures: list[tuple[str, str]] = []
        for session_id, result in enumerate(sessions):
            if isinstance(result, EpisodeError):
                outputs += self._zero_session(rec, session_id, result)
                continue
            if isinstance(result, BaseException):
                err = "".join(traceback.format_exception_only(type(result), result)).strip()
                failures.append((make_key(rec.uid, session_id, 0), err))
                continue
            outputs += await self._score_session(rec, session_id, result)
        if outputs:
            await self._write(outputs)
        if failures:
            tags = [
                {
                    "uid": rec.uid,
                    "global_step": self.global_step,
                    "status": "failure",
                    "error": err,
                    "seq_len": 0,
                }
                for _, err in failures
            ]
            await self.worker.plane.async_kv_batch_put(
                [k for k, _ in failures], self.partition, None, tags
            )
        return len(outputs), len(failures)

    def _zero_session(self, rec: PromptRecord, session_id: int,
                      err: EpisodeError) -> list[_Scored]:
        """A failed episode scored 0 (see :class:`EpisodeError`): its outputs, or one of the
        prompt and a masked end-of-turn token when it recorded none."""
        outs = err.outputs or [AgentOutput(
            prompt_ids=list(rec.prompt_ids), response_ids=self.worker.eos_ids[:1],
            rollout_log_probs=[0.0], finish_reason="stop",
            weight_version=self.worker.engine.weight_version, num_turns=0, loss_mask=[0])]
        where = f"session {session_id} of prompt {rec.uid}"
        self._episode_errors.append(f"{where}: {err}")
        # every reward's field is written (0), as for a scored output
        parts = dict.fromkeys(reward_fields(self.worker.recipe, get_registry()), 0.0)
        scored = []
        for index, out in enumerate(outs):
            out.check()
            out.metrics = dict(err.metrics)
            scored.append(_Scored(make_key(rec.uid, session_id, index), rec.uid, out, 0.0,
                                  dict(parts), error=str(err)))
        return scored

    async def _score_session(
        self, rec: PromptRecord, session_id: int, outs: list[AgentOutput]
    ) -> list[_Scored]:
        """Score a session's outputs: the last one by the reward functions, and every earlier
        output of the session carries that same score (the episode's outcome; docs/agents.md).
        """
        if not outs:
            raise RuntimeError(f"agent loop {self.worker.recipe.rollout.agent_loop!r} returned "
                               f"no output for session {session_id} of prompt {rec.uid}")
        for out in outs:
            out.check()
        keys = [make_key(rec.uid, session_id, index) for index in range(len(outs))]
        final = await self._score(keys[-1], rec, outs[-1])
        earlier = [_Scored(k, rec.uid, o, final.score, final.parts)
                   for k, o in zip(keys, outs[:-1], strict=False)]
        return earlier + [final]

    async def _score(self, key: str, rec: PromptRecord, out: AgentOutput) -> _Scored:
        from rlctl.plugin_errors import PluginCallError
        from rlctl.rewards.base import RewardInput

        sample = RewardInput.from_tokens(
            self.worker.tokenizer,
            prompt_ids=out.prompt_ids,
            response_ids=out.response_ids if out.reward_ids is None else out.reward_ids,
            ground_truth=rec.ground_truth,
            data_source=rec.data_source,
            eos_token_ids=self.worker.eos_ids,
            extra=out.extra,
            prompt_text=self._prompt_text(rec, out.prompt_ids),
        )
        try:
            result = self.worker.rewards(sample)  # {"score", "<name>", "<name>/<component>"}
            if self.worker.judges:
                judged = await self.worker.judges.judge(sample, self._ask)
                result = {**result, **judged, "score": result["score"] + judged["score"]}
        except PluginCallError as exc:  # names the reward's plugin and file:line already
            context = f"scoring sample {key} (data source {rec.data_source!r})"
            raise exc.within(context) from exc.__cause__
        except Exception as exc:
            raise RuntimeError(
                f"scoring sample {key} (data source {rec.data_source!r}) failed: {exc}"
            ) from exc
        parts = {f"reward/{k}": float(v) for k, v in result.items() if k != "score"}
        score = float(result["score"])
        overlong = self.worker.recipe.algorithm.overlong
        if overlong.buffer_len:  # DAPO's soft overlong punishment, part of the score
            from rlctl.algorithms.overlong import overlong_penalty

            penalty = overlong_penalty(  # generated tokens only: observations do not count
                sum(out.mask()), buffer_len=overlong.buffer_len,
                max_tokens=overlong.max_tokens or self.worker.recipe.rollout.max_new_tokens,
                penalty_factor=overlong.penalty_factor)
            parts["reward/overlong"] = penalty
            score += penalty
        return _Scored(key, rec.uid, out, score, parts)

    def _prompt_text(self, rec: PromptRecord, prompt_ids: list[int]) -> str | None:
        """The decoded prompt of ``rec`` when this output's prompt is the record's own (decoded
        once per group); ``None`` (decode per output) for a later turn's longer prompt."""
        if prompt_ids != rec.prompt_ids:
            return None
        text = self._prompt_texts.get(rec.uid)
        if text is None:
            text = self.worker.tokenizer.decode(list(prompt_ids), skip_special_tokens=True)
            self._prompt_texts[rec.uid] = text
        return text

    async def _ask(self, text: str, *, max_new_tokens: int, temperature: float,
                   chat: bool = True) -> str:
        """A judge's question to the rollout engine: text in, decoded reply out."""
        from rlctl.tasks import Prompt, tokenize_prompt

        prompt = Prompt(ground_truth={}, data_source="judge",
                        messages=[{"role": "user", "content": text}])
        ids = tokenize_prompt(prompt, self.worker.tokenizer, apply_chat_template=chat)
        sampling = SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature)
        gen = await self.worker.engine.generate(ids, sampling)
        return self.worker.tokenizer.decode(gen.token_ids, skip_special_tokens=True)

    async def _write(self, items: list[_Scored]) -> None:
        """Queue outputs for the data plane; outputs finishing together share one put.

        Sessions that an engine generated in one batch complete within a few event-loop
        ticks of each other; coalescing their puts turns hundreds of small puts into one.
        """
        self._buffer.extend(items)
        if self._flushing is None:
            loop = asyncio.get_running_loop()
            self._flushing = loop.create_future()
            flushed = self._flushing
            loop.call_later(0.002, lambda: loop.create_task(self._flush(flushed)))
        await asyncio.shield(self._flushing)

    async def _flush(self, done: asyncio.Future) -> None:
        items, self._buffer, self._flushing = self._buffer, [], None
        try:
            await self._put(items)
        except BaseException as exc:  # noqa: BLE001 - handed to every waiter on the flush
            done.set_exception(exc)
            return
        done.set_result(None)

    async def _put(self, items: list[_Scored]) -> None:
        import torch
        from tensordict import TensorDict

        fields: dict[str, Any] = {
            # jagged [B, (P_i)] / [B, (R_i)]: stored without padding
            "prompt_ids": from_rows([it.out.prompt_ids for it in items], torch.long),
            "response_ids": from_rows([it.out.response_ids for it in items], torch.long),
            "rollout_log_probs": from_rows(
                [it.out.rollout_log_probs for it in items], torch.float32
            ),
            # [B, (R_i)] 1 = generated, 0 = observation: every loss and estimator masks with it
            "loss_mask": from_rows([it.out.mask() for it in items], torch.int8),
            "score": torch.tensor([it.score for it in items], dtype=torch.float32),  # [B]
        }
        for name in sorted({k for it in items for k in it.parts}):
            fields[name] = torch.tensor(
                [it.parts.get(name, 0.0) for it in items], dtype=torch.float32
            )
        if any(it.out.token_rewards is not None for it in items):
            # Per-step rewards [B, (R_i)], in the same put (it makes the outputs terminal); only
            # outputs tagged ``token_rewards`` are read back, the zeros of the others never are.
            fields["token_rewards"] = from_rows(
                [it.out.token_rewards or [0.0] * len(it.out.response_ids) for it in items],
                torch.float32)
        td = TensorDict(fields, batch_size=[len(items)])
        self.worker.written_fields.update(fields)
        tags = [self._tags(it) for it in items]
        await self.worker.plane.async_kv_batch_put(
            [it.key for it in items], self.partition, td, tags
        )

    def _tags(self, it: _Scored) -> dict[str, Any]:
        out = it.out
        oldest, newest = out.version_range()
        tags: dict[str, Any] = {
            "uid": it.uid,
            "global_step": self.global_step,
            "dispatch_step": self.global_step,
            "status": "success",
            "prompt_len": len(out.prompt_ids),
            "response_len": len(out.response_ids),
            "loss_tokens": sum(out.mask()),  # generated tokens: what response_length counts
            "seq_len": len(out.prompt_ids) + len(out.response_ids),
            "weight_version": out.weight_version,
            # the oldest / newest policy among the turns (one version for a single turn)
            "weight_version_min": oldest,
            "weight_version_max": newest,
            "finish_reason": out.finish_reason,
            "num_turns": out.num_turns,
        }
        if self.worker.recipe.algorithm.staleness.partial_rollout == "resume":
            # the weight version of every generated span, and how often it was cut and resumed
            tags["weight_segments"] = out.segments()
            tags["partial_aborts"] = out.partial_aborts
            tags["partial_resumes"] = out.partial_resumes
        if out.token_rewards is not None:
            tags["token_rewards"] = True
        if it.error is not None:
            tags["episode_error"] = it.error[:1000]
        for name, value in out.metrics.items():
            tags[f"agent/{name}"] = float(value)
        for name, value in it.parts.items():  # components: names known only now (sessions.py)
            if is_reward_component(name):
                tags[name] = float(value)
        if out.notes:  # a few short texts, on the outputs that have any (sessions.py)
            tags["notes"] = [str(n)[:NOTE_CHARS] for n in out.notes[:3]]
        return tags

    async def _generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Any:
        return await self.worker.engine.generate(prompt_ids, sampling)

    async def _generate_many(
        self, prompts: list[list[int]], sampling: SamplingParams
    ) -> list[Any]:
        """One generation per prompt, or the exception of its request: the engine's batched
        ``generate_many`` where it has one, else its ``generate`` per prompt, concurrently."""
        return await self.worker.engine.generate_many(prompts, sampling)

