"""The AgentLoop worker: reads prompts, runs ``n`` sessions each, writes outputs to the data plane.

It never returns tensors to the controller: outputs go straight into the data plane under
``{uid}_{session_id}_{index}`` with tags (``global_step``, ``status``, ``seq_len``, ``uid``),
and the ReplayBuffer tells the controller when a step is complete. A session that raises
becomes a ``failure`` tag carrying the error, so the step reports it instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

from rlctl.config.loaded import LoadedRecipe
from rlctl.protocol.kv import KVBatchMeta, make_key
from rlctl.protocol.refs import resolve
from rlctl.trainer.worker.agent_loop import (
    AgentLoopSpec,
    AgentOutput,
    PromptRecord,
    SamplingParams,
)
from rlctl.trainer.worker.fields import from_rows, non_tensor_column, rows

# A session is bounded by schedule.sample_timeout_s; the calls that run sessions (and the
# controller's wait for their samples) by that plus this, so an overdue session is reported
# as the failure of its uid before the whole call is given up on.
SESSION_GRACE_S = 5.0


def generate_bound(recipe: Any) -> float:
    """Seconds a ``generate`` call, or a wait for its samples, may take."""
    return recipe.schedule.sample_timeout_s + SESSION_GRACE_S


def make_weight_sync(loaded: LoadedRecipe, registry: Any) -> tuple[Any, Any]:
    """The run's weight sync and its validated options (``None`` without an options model).

    One place for the options: ``[engines.rollout.weight_sync_options]``, validated when the
    recipe was loaded by the model of the sync named in ``[engines.rollout] weight_sync``,
    else of the engine's default. A recipe loaded without that step (built by hand) gets
    the table validated here.
    """
    from rlctl.config.plugin_options import weight_sync_name

    reg = registry.get("weight_sync", weight_sync_name(loaded.recipe, registry))
    options = loaded.options_for("engines.rollout.weight_sync_options")
    if options is None and reg.options is not None:
        options = reg.options.model_validate(loaded.recipe.engines.rollout.weight_sync_options)
    return reg.load()(options), options


class RolloutWorker:
    """One AgentLoop worker with its rollout engine, reward functions and agent loop."""

    def __init__(
        self, loaded: LoadedRecipe, plane: Any, rank: int = 0, threads: int | None = None
    ) -> None:
        self.loaded = loaded
        self.recipe = loaded.recipe
        self.plane = plane
        self.rank = rank
        self.threads = threads
        self.engine: Any = None
        self._idle_since: float | None = None  # end of the last generate (streaming metric)
        self.written_fields: set[str] = set()  # every sample field this worker has put
        # One generate call at a time: a Ray actor runs calls in threads (streaming submits
        # step t + 1 while step t generates) and an engine's async batching belongs to one
        # event loop; the overlap streaming wants is rollout vs. training, not two calls.
        self._generating = threading.Lock()

    def ready(self) -> bool:
        import torch

        from rlctl.engines.rollout.contract import RolloutEngineSpec
        from rlctl.models.loading import load_tokenizer
        from rlctl.registry import get_registry
        from rlctl.rewards.reward_set import RewardSet
        from rlctl.trainer.worker.device import pick_device
        from rlctl.trainer.worker.reward_sections import effective_rewards

        if self.threads:
            torch.set_num_threads(self.threads)
        registry = get_registry()
        self.tokenizer = load_tokenizer(self.recipe.model)
        # The controller moves the exported weights here (object store in Ray mode); the
        # registered weight sync applies them: sync(weights, engine, version). The engine gets
        # the sync's options too (vLLM starts its servers for the transfer they name).
        self.weight_sync, sync_options = make_weight_sync(self.loaded, registry)
        engine_cls = registry.load("rollout_engine", self.recipe.engines.rollout.backend)
        self.engine = engine_cls(RolloutEngineSpec(
            recipe=self.recipe, device=pick_device(self.recipe),
            seed=self.recipe.run.seed + 1000 * self.rank,
            options=self.loaded.options_for("engines.rollout.options"),
            weight_sync_options=sync_options,
        ))
        self.engine.load()
        self.agent_loop = build_agent_loop(self.loaded, registry, self.tokenizer)
        sections = effective_rewards(self.recipe, registry)
        options = [self.loaded.option_kwargs(f"rewards[{i}].options") for i in range(len(sections))]
        self.rewards = RewardSet.from_sections(sections, registry, options)
        self.judges = RewardSet.from_sections(sections, registry, options, kind="judge")
        eos = self.tokenizer.eos_token_id
        self.eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        return True

    # ------------------------------------------------------------------ rollout
    def generate(
        self,
        prompts: KVBatchMeta,
        partition: str,
        global_step: int,
        sampling: SamplingParams,
        group_size: int,
    ) -> dict[str, float]:
        """Run every session of ``prompts`` and put the outputs into ``partition``.

        Returns only counts: the outputs are in the data plane.
        """
        td = self.plane.kv_batch_get(
            list(prompts.keys), prompts.partition_id,
            ["prompt_ids", "ground_truth", "data_source", "raw_prompt"],
        )
        truths = non_tensor_column(td, "ground_truth")
        sources = non_tensor_column(td, "data_source")
        raws = non_tensor_column(td, "raw_prompt")
        records = [
            PromptRecord(uid=key, prompt_ids=ids.tolist(), ground_truth=json.loads(truth),
                         data_source=str(source), prompt=json.loads(raw))
            for key, ids, truth, source, raw in zip(
                prompts.keys, rows(td["prompt_ids"]), truths, sources, raws, strict=True)
        ]
        n_per_prompt = [int(tags.get("n", group_size)) for tags in prompts.tags]
        # The actor itself stays synchronous (Ray would otherwise run it as an async actor);
        # one event loop per call drives the sessions concurrently so the engine batches them.
        step = _StepRollout(self, partition, global_step, sampling)
        bound = generate_bound(self.recipe)
        if not self._generating.acquire(timeout=bound):
            raise TimeoutError(f"step {global_step}: the previous generate call of this rollout "
                               f"worker held the engine for over {bound:g} s")
        try:
            started = time.monotonic()
            counts = asyncio.run(step.run_all(records, n_per_prompt))
            # how long this worker sat idle before this call: waiting for the trainer
            counts["idle_s"] = 0.0 if self._idle_since is None else started - self._idle_since
            self._idle_since = time.monotonic()
        finally:
            self._generating.release()
        return counts

    def varied_groups(self, meta: KVBatchMeta, field: str) -> list[str]:
        """The uids of ``meta`` whose samples differ in ``field`` (dynamic sampling)."""
        from rlctl.trainer.worker.group_filter import varied_groups

        return varied_groups(self.plane, meta, field)

    # ------------------------------------------------------------------ inspection
    def dump_samples(self, meta: KVBatchMeta, path: str) -> int:
        """Write decoded samples of ``meta`` (prompt, response, reward, advantage) as JSON lines."""
        from pathlib import Path

        names = ["prompt_ids", "response_ids", "score", "advantages", "loss_mask"]
        td = self.plane.kv_batch_get(list(meta.keys), meta.partition_id, names)
        prompt_rows, response_rows, adv_rows = (
            rows(td["prompt_ids"]),
            rows(td["response_ids"]),
            rows(td["advantages"]),
        )
        mask_rows = rows(td["loss_mask"])
        out_rows = []
        for i, (key, tags) in enumerate(zip(meta.keys, meta.tags, strict=True)):
            adv = adv_rows[i]
            out_rows.append(
                {
                    "key": key,
                    "step": tags.get("global_step"),
                    "prompt": self.tokenizer.decode(
                        prompt_rows[i].tolist(), skip_special_tokens=False
                    ),
                    "response": self.tokenizer.decode(
                        response_rows[i].tolist(), skip_special_tokens=False
                    ),
                    "reward": float(td["score"][i]),
                    "advantage": float(adv.float().mean()) if adv.numel() else 0.0,
                    "response_len": tags.get("response_len"),
                    "dispatch_step": tags.get("dispatch_step"),
                    "weight_version_min": tags.get("weight_version_min"),
                    "weight_version_max": tags.get("weight_version_max"),
                    # multi-turn: what the policy generated ("gen") and what it read ("obs")
                    "segments": self._segments(response_rows[i].tolist(), mask_rows[i].tolist()),
                }
            )
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps(r) + "\n" for r in out_rows))
        return len(out_rows)

    def _segments(self, ids: list[int], mask: list[int]) -> list[list[str]]:
        out: list[list[str]] = []
        start = 0
        for end in range(1, len(ids) + 1):
            if end == len(ids) or mask[end] != mask[start]:
                text = self.tokenizer.decode(ids[start:end], skip_special_tokens=False)
                out.append(["gen" if mask[start] else "obs", text])
                start = end
        return out

    # ------------------------------------------------------------------ checkpoints
    def sample_fields(self) -> list[str]:
        """The fields of every sample this worker has put (a checkpoint saves them all)."""
        return sorted(self.written_fields)

    def save_samples(self, meta: KVBatchMeta, fields: list[str], path: str) -> int:
        """Finished samples of ``meta`` (tags and ``fields``) into directory ``path``."""
        from rlctl.trainer.worker.sample_store import save_samples

        return save_samples(self.plane, meta.partition_id, meta.keys, meta.tags, fields, path)

    def load_samples(self, path: str) -> list[str]:
        """Samples saved by :meth:`save_samples` back into the data plane; their keys."""
        from rlctl.trainer.worker.sample_store import load_samples, stored_fields

        self.written_fields.update(stored_fields(path))  # a later checkpoint saves them too
        return load_samples(self.plane, path)

    # ------------------------------------------------------------------ weights
    def update_weights(self, weights: Any, version: int) -> int:
        """Load new policy weights (a state dict, or ``[ref]``: an ObjectRef or a LocalRef)."""
        if isinstance(weights, list):  # a reference, wrapped so Ray does not resolve it early
            weights = resolve(weights[0], timeout=self.recipe.schedule.phase_timeout_s)
        self.weight_sync(weights, self.engine, version)
        return self.engine.weight_version

    def state_dict(self) -> dict[str, Any]:
        """Sampler state: restoring it makes a resumed run draw the same samples."""
        return self.engine.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.engine.load_state_dict(state)

    def weight_version(self) -> int:
        return self.engine.weight_version

    def close(self) -> None:
        # The sync first, while the servers run: it may hold state they share (sglang's
        # process group). The engine closes (stops its servers) even if that fails.
        close_sync = getattr(getattr(self, "weight_sync", None), "close", None)
        close_engine = getattr(self.engine, "close", None)
        try:
            if close_sync is not None:
                close_sync()
        finally:
            if close_engine is not None:
                close_engine()

    def pid(self) -> int:
        """This worker's process id; also the liveness check the controller sends a late rank."""
        return os.getpid()


def build_agent_loop(loaded: LoadedRecipe, registry: Any, tokenizer: Any) -> Any:
    """The recipe's agent loop (its registered target), given its options as validated at load
    and those of the tools / environment it builds."""
    loop_cls = registry.load("agent_loop", loaded.recipe.rollout.agent_loop)
    return loop_cls(AgentLoopSpec(
        recipe=loaded.recipe, tokenizer=tokenizer, registry=registry,
        options=loaded.options_for("rollout.agent_loop_options"),
        plugin_options=loaded.plugin_options,
    ))


@dataclass
class _Scored:
    """One output with its reward, waiting to be written."""

    key: str
    uid: str
    out: AgentOutput
    score: float
    parts: dict[str, float]


class _StepRollout:
    """The sessions of one ``generate`` call, run concurrently on one event loop."""

    def __init__(
        self, worker: RolloutWorker, partition: str, global_step: int, sampling: SamplingParams
    ) -> None:
        self.worker = worker
        self.partition = partition
        self.global_step = global_step
        self.sampling = sampling
        self._buffer: list[_Scored] = []
        self._flushing: asyncio.Future | None = None

    async def run_all(
        self, records: list[PromptRecord], n_per_prompt: list[int]
    ) -> dict[str, float]:
        results = await asyncio.gather(
            *(
                self._run_prompt(rec, n)
                for rec, n in zip(records, n_per_prompt, strict=True)
            )
        )
        return {
            "outputs": float(sum(r[0] for r in results)),
            "failures": float(sum(r[1] for r in results)),
        }

    async def _run_prompt(self, rec: PromptRecord, n: int) -> tuple[int, int]:
        sessions = await asyncio.gather(
            *(self._bounded_session(rec, s) for s in range(n)), return_exceptions=True,
        )
        outputs: list[_Scored] = []
        failures: list[tuple[str, str]] = []
        for session_id, result in enumerate(sessions):
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

    async def _bounded_session(self, rec: PromptRecord, session_id: int) -> Any:
        """One session, cancelled once it runs past ``schedule.sample_timeout_s``: it then
        becomes a ``failure`` sample naming its uid, and its step reports it."""
        bound = self.worker.recipe.schedule.sample_timeout_s
        deadline = asyncio.timeout(bound)
        try:
            async with deadline:
                return await self.worker.agent_loop.run(rec, session_id, self.sampling,
                                                        self._generate)
        except TimeoutError:
            if not deadline.expired():
                raise  # the agent loop's own timeout, not ours
            raise TimeoutError(
                f"session {session_id} of prompt {rec.uid} ran past schedule.sample_timeout_s "
                f"= {bound:g} s and was cancelled") from None

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
        if out.token_rewards is not None:
            tags["token_rewards"] = True
        for name, value in out.metrics.items():
            tags[f"agent/{name}"] = float(value)
        return tags

    async def _generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Any:
        return await self.worker.engine.generate(prompt_ids, sampling)

