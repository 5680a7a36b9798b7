"""The AgentLoop worker: reads prompts, runs ``n`` sessions each, writes outputs to the data plane.

It never returns tensors to the controller: outputs go straight into the data plane under
``{uid}_{session_id}_{index}`` with tags (``global_step``, ``status``, ``seq_len``, ``uid``),
and the ReplayBuffer tells the controller when a step is complete. A session that raises
becomes a ``failure`` tag carrying the error, so the step reports it instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any, ClassVar

from rlctl.agents.contract import AgentLoop, AgentLoopSpec, PromptRecord, SamplingParams
from rlctl.config.loaded import LoadedRecipe
from rlctl.config.placement import Placed
from rlctl.engines.rollout.contract import RolloutEngine, WeightSync
from rlctl.protocol.kv import KVBatchMeta
from rlctl.protocol.refs import resolve
from rlctl.trainer.startup_heap import freeze_startup_heap
from rlctl.trainer.worker.contract import Worker
from rlctl.trainer.worker.fields import non_tensor_column, rows
from rlctl.trainer.worker.step_rollout import StepRollout

# A session is bounded by schedule.sample_timeout_s; the calls that run sessions (and the
# controller's wait for their samples) by that plus this, so an overdue session is reported
# as the failure of its uid before the whole call is given up on.
SESSION_GRACE_S = 5.0


def generate_bound(recipe: Any) -> float:
    """Seconds a ``generate`` call, or a wait for its samples, may take."""
    return recipe.schedule.sample_timeout_s + SESSION_GRACE_S


def make_weight_sync(loaded: LoadedRecipe, registry: Any) -> WeightSync:
    """The run's weight sync, built with its validated options (``None`` without an options
    model; the engine's spec carries the same object).

    One place for the options: ``[engines.rollout.weight_sync_options]``, validated when the
    recipe was loaded by the model of the sync named in ``[engines.rollout] weight_sync``,
    else of the engine's default.
    """
    from rlctl.config.plugin_options import weight_sync_name

    reg = registry.get("weight_sync", weight_sync_name(loaded.recipe, registry))
    options = loaded.options_for("engines.rollout.weight_sync_options")
    return built_as(reg, WeightSync, reg.load()(options))


def built_as(reg: Any, base: type, built: Any) -> Any:
    """``built`` (what ``reg``'s target built), checked to be a ``base``: a plugin that does
    not subclass its kind's base is named here, not by an AttributeError mid-run."""
    if not isinstance(built, base):
        raise TypeError(f"{reg.describe()} built a {type(built).__name__}, which is not a "
                        f"{base.__module__}.{base.__name__}: subclass it (docs/plugins.md)")
    return built


class RolloutWorker(Worker):
    """One AgentLoop worker with its rollout engine, reward functions and agent loop."""

    # Ray runs update_weights on a thread of its own (RayWorkerGroup): a weight update reaches
    # the engine while a generate call runs (partial rollouts abort its requests there),
    # however many generate calls wait their turn on the default threads.
    concurrency_groups: ClassVar[dict[str, int]] = {**Worker.concurrency_groups, "weights": 1}
    method_groups: ClassVar[dict[str, str]] = {**Worker.method_groups,
                                               "update_weights": "weights"}

    def __init__(
        self, loaded: LoadedRecipe, plane: Any, rank: int = 0, placed: Placed | None = None
    ) -> None:
        self.loaded = loaded
        self.recipe = loaded.recipe
        self.plane = plane
        self.rank = rank
        self.placed = placed
        self.engine: RolloutEngine | None = None
        self.weight_sync: WeightSync | None = None
        self._idle_since: float | None = None  # end of the last generate (streaming metric)
        self.written_fields: set[str] = set()  # every sample field this worker has put
        # One generate call at a time: a Ray actor runs calls in threads (streaming submits
        # step t + 1 while step t generates) and an engine's async batching belongs to one
        # event loop; the overlap streaming wants is rollout vs. training, not two calls.
        self._generating = threading.Lock()

    def ready(self, master_port: int | None = None) -> bool:

        from rlctl.engines.rollout.contract import RolloutEngineSpec
        from rlctl.models.loading import load_tokenizer
        from rlctl.registry import get_registry
        from rlctl.rewards.reward_set import RewardSet
        from rlctl.trainer.plan import plan_of
        from rlctl.trainer.worker.device import pick_device
        from rlctl.trainer.worker.reward_sections import effective_rewards

        self.take_seat()
        registry = get_registry()
        self.tokenizer = load_tokenizer(self.recipe.model)
        # The controller moves the exported weights here (object store in Ray mode); the
        # registered weight sync applies them: sync(weights, engine, version). The engine gets
        # the sync's options too (vLLM starts its servers for the transfer they name).
        self.weight_sync = make_weight_sync(self.loaded, registry)
        reg = registry.get("rollout_engine", self.recipe.engines.rollout.backend)
        spec = RolloutEngineSpec.from_loaded(
            self.loaded, rank=self.rank, device=pick_device(self.recipe),
            release_memory=plan_of(self.loaded).releases_rollout_memory)
        self.engine = built_as(reg, RolloutEngine, reg.load()(spec))
        self.engine.load()
        self.agent_loop = build_agent_loop(self.loaded, registry, self.tokenizer)
        sections = effective_rewards(self.recipe, registry)
        options = [self.loaded.options_for(f"rewards[{i}].options") for i in range(len(sections))]
        self.rewards = RewardSet.from_sections(sections, registry, options)
        self.judges = RewardSet.from_sections(sections, registry, options, kind="judge")
        eos = self.tokenizer.eos_token_id
        self.eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        freeze_startup_heap()  # the engine and rewards are built: see startup_heap.py
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
        step = StepRollout(self, partition, global_step, sampling)
        bound = generate_bound(self.recipe)
        if not self._generating.acquire(timeout=bound):
            raise TimeoutError(f"step {global_step}: the previous generate call of this rollout "
                               f"worker held the engine for over {bound:g} s")
        try:
            # A released engine (colocated, training ran) takes everything back first.
            self.engine.resume_memory(timeout_s=self._memory_bound)
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
                    # partial rollouts: [version, start, end] of each generated span
                    **({"weight_segments": tags["weight_segments"]}
                       if "weight_segments" in tags else {}),
                    # an episode scored 0 by its loop's on_episode_error: why it failed
                    **({"episode_error": tags["episode_error"]}
                       if "episode_error" in tags else {}),
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

    # ------------------------------------------------------------------ colocated memory
    @property
    def _memory_bound(self) -> float:
        """Seconds releasing or taking back memory may take (per request, every server)."""
        return self.recipe.schedule.phase_timeout_s / 2

    def release_memory(self) -> dict[str, Any]:
        """Free the engine's weights and KV cache while training runs (called between
        generations); returns whether it did and why (``released``, ``why``)."""
        release = self.engine.memory_release()
        if release.releases:
            self.engine.release_memory(timeout_s=self._memory_bound)
        return {"released": release.releases, "why": release.why}

    # ------------------------------------------------------------------ weights
    def update_weights(self, weights: Any, version: int) -> int:
        """Load new policy weights (a state dict, or ``[ref]``: an ObjectRef or a LocalRef).

        A server engine runs the sync inside its ``weight_update``: requests that start
        meanwhile wait for the new weights, and with partial rollouts on the requests in
        flight are aborted first (each must answer within half of
        ``schedule.phase_timeout_s``, the bound of this whole call) and resume afterwards.
        A released engine takes its weights back before the sync writes into them (waking
        after would restore its CPU copy over the new weights) and its KV cache after it.
        """
        if isinstance(weights, list):  # a reference, wrapped so Ray does not resolve it early
            weights = resolve(weights[0], timeout=self.recipe.schedule.phase_timeout_s)
        with self.engine.weight_update(timeout_s=self.recipe.schedule.phase_timeout_s / 2):
            self.engine.resume_memory(("weights",), timeout_s=self._memory_bound)
            self.weight_sync(weights, self.engine, version)
            self.engine.resume_memory(("kv_cache",), timeout_s=self._memory_bound)
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
        try:
            if self.weight_sync is not None:
                self.weight_sync.close()
        finally:
            if self.engine is not None:
                self.engine.close()



def build_agent_loop(loaded: LoadedRecipe, registry: Any, tokenizer: Any) -> Any:
    """The recipe's agent loop (its registered target), given its options as validated at load
    and those of the tools / environment it builds."""
    reg = registry.get("agent_loop", loaded.recipe.rollout.agent_loop)
    spec = AgentLoopSpec.from_loaded(loaded, tokenizer=tokenizer, registry=registry)
    return built_as(reg, AgentLoop, reg.load()(spec))
