"""The single controller of a run's training steps.

It holds only :class:`KVBatchMeta` and scalar metrics. One step reads top to bottom like the
algorithm (docs/design.md, "One training step"): the rollout producer answers with the step's
batch, then each phase is one call on the training workers, which fetch the fields they need
from the data plane, compute, and put their outputs back. Which phases run, and where the old
log-probs and advantages come from, is the run's :class:`~rlctl.trainer.plan.StepPlan`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rlctl.config.derived import Derived
from rlctl.config.recipe import Recipe
from rlctl.protocol.kv import KVBatchMeta
from rlctl.trainer import metric_reduce as mr
from rlctl.trainer.controller.balance import (
    balanced_equal_partition,
    balanced_group_partition,
    seq_lengths,
)
from rlctl.trainer.controller.producer import RolloutProducer
from rlctl.trainer.controller.step_timer import StepTimer
from rlctl.trainer.controller.worker_group import TrafficMeter, WorkerGroup
from rlctl.trainer.plan import StepPlan
from rlctl.trainer.worker.rollout_worker import RolloutWorker
from rlctl.trainer.worker.sessions import step_notes
from rlctl.trainer.worker.training_worker import TrainingWorker

EXTREME_METRICS = (
    "critic/score",
    "critic/rewards",
    "critic/advantages",
    "critic/returns",
    "response_length",
    "prompt_length",
)


class StepError(RuntimeError):
    """A training step could not complete (failed rollouts, stale weights, ...)."""


@dataclass(frozen=True)
class Shards:
    """One step's batch split over the training ranks (metadata only)."""

    per_rank: list[dict[str, Any]]
    """``{"meta": shard}`` per training rank: model-parallel peers get the same shard."""
    pad_to: int
    """Rows every rank pads its shard to (collectives must line up)."""


class Trainer:
    """Runs training steps by dispatching metadata to worker groups."""

    def __init__(
        self,
        recipe: Recipe,
        derived: Derived,
        plan: StepPlan,
        *,
        train: WorkerGroup,
        rollout: WorkerGroup,
        producer: RolloutProducer,
        validation: RolloutProducer | None,
        dp_ranks: list[int],
        meter: TrafficMeter,
        timer: StepTimer,
        use_object_refs: bool,
        run_dir: Any = None,
    ) -> None:
        """``dp_ranks``: the data-parallel rank of every training rank (the session asks the
        ranks once, at start)."""
        from rlctl.algorithms.kl import make_kl_controller

        self.recipe = recipe
        self.derived = derived
        self.plan = plan
        self.train = train
        self.rollout = rollout
        self.producer = producer
        self.validation = validation
        self.dp_ranks = dp_ranks
        self.meter = meter
        self.timer = timer
        self.use_object_refs = use_object_refs
        self.run_dir = run_dir
        kl = recipe.algorithm.kl
        self.kl_ctl = make_kl_controller(kl.controller, kl.coef, target=kl.target,
                                         horizon=kl.horizon)
        self.policy_version = 0
        self.notes: list[str] = []  # the last step's episode notes (tools that raised...)
        self.memory_released = 0.0  # the rollout workers that released, last step (fraction)
        self._memory_kept_noted = False  # "released: no, why" is said once, not every step

    # ================================================================== one step
    def step(self, step: int) -> dict[str, float]:
        """One training step; returns its scalar metrics."""
        self.begin_step()
        started = time.perf_counter()
        with self.timer("gen"):
            batch, produced = self.producer.batch_for(step, self.policy_version)
        self.notes = step_notes(batch)  # shown by the run once the step is logged
        self.release_rollout_memory()
        shards = self.balance(batch)
        partials = self.old_log_probs(shards)
        partials += self.reference_log_probs(shards)
        self.values(shards)
        partials += self.advantages(batch)
        partials += self.update_critic(shards, step)
        partials += self.update_actor(shards, step)
        with self.timer("update_weights"):
            self.sync_weights(version=step)  # a released rollout takes its memory back here
        merged = mr.merge(partials)
        self.update_kl_controller(merged)
        self.dump_rollouts(batch, step)
        self.producer.release(batch)
        return self.step_metrics(merged, batch, produced, time.perf_counter() - started)

    # ================================================================== phases
    def old_log_probs(self, shards: Shards) -> list[dict[str, mr.Partial]]:
        """The policy's log-probs before this step's update, where the plan runs their pass."""
        if not self.plan.old_log_prob_pass:
            return []  # the update's own forward gives them
        with self.timer("old_log_prob"):
            return self.train.call(TrainingWorker.compute_log_prob, shards.per_rank,
                                   role="actor", field="old_log_probs", pad_to=shards.pad_to)

    def reference_log_probs(self, shards: Shards) -> list[dict[str, mr.Partial]]:
        """The frozen reference's log-probs, where a KL to it enters (from the reference's own
        engine, or the actor's with its LoRA adapters off: the plan's ``reference``)."""
        if not self.plan.has_reference:
            return []
        with self.timer("ref"):
            return self.train.call(TrainingWorker.compute_log_prob, shards.per_rank,
                                   role="ref", field="ref_log_probs", pad_to=shards.pad_to)

    def values(self, shards: Shards) -> None:
        """The critic's values, with a critic."""
        if "critic" in self.plan.roles:
            with self.timer("values"):
                self.train.call(TrainingWorker.compute_values, shards.per_rank,
                                pad_to=shards.pad_to)

    def advantages(self, batch: KVBatchMeta) -> list[dict[str, mr.Partial]]:
        """The advantage phase on group-whole shards, where the plan runs it on its own."""
        if not self.plan.advantage_phase:
            return []  # the actor update computes them
        with self.timer("adv"):
            return self.train.call(TrainingWorker.compute_advantage,
                                   self.per_rank(self.group_shards(batch)),
                                   kl_coef=self.kl_ctl.value)

    def update_critic(self, shards: Shards, step: int) -> list[dict[str, mr.Partial]]:
        if "critic" not in self.plan.roles:
            return []
        with self.timer("update_critic"):
            return self.train.call(TrainingWorker.update_critic, shards.per_rank,
                                   pad_to=shards.pad_to, step=step)

    def update_actor(self, shards: Shards, step: int) -> list[dict[str, mr.Partial]]:
        """The actor's update (after the critic's warm-up), the next step's prompts fed into
        the data plane while the ranks train."""
        if step <= self.plan.critic_warmup_steps:
            return []
        with self.timer("update_actor"):
            return self.train.call(TrainingWorker.update_actor, shards.per_rank,
                                   pad_to=shards.pad_to, kl_coef=self.kl_ctl.value, step=step,
                                   meanwhile=lambda: self.producer.prefetch(step))

    def release_rollout_memory(self) -> None:
        """Colocated sync training (the plan's ``rollout_memory``): the rollout engines free
        their weights and KV cache for the training phases; the weight sync takes the weights
        back before it writes them, the KV cache after. An engine that cannot on its device
        keeps them and says why (once, in the step's notes)."""
        if not self.plan.releases_rollout_memory:
            return
        with self.timer("release_memory"):
            reports = self.rollout.call(RolloutWorker.release_memory)
        self.memory_released = sum(r["released"] for r in reports) / max(len(reports), 1)
        kept = sorted({r["why"] for r in reports if not r["released"]})
        if kept and not self._memory_kept_noted:
            self.notes.append("the rollout's memory stays resident while training runs: "
                              + "; ".join(kept))
            self._memory_kept_noted = True

    def sync_weights(self, version: int) -> None:
        """Actor -> rollout engines, stamped with ``version``.

        Every training rank joins the gather of what the plan's ``weights`` moves (full
        weights, LoRA adapters, or the adapters merged in); rank 0 returns them (in Ray mode as
        an object-store reference, so weights never pass through the controller), handed on
        to the rollout engines as the export's own result: the controller dispatches both
        calls at once instead of waiting in between.
        """
        exporting = self.train.submit(
            TrainingWorker.export_weights,
            [{"as_object_ref": self.use_object_refs}] * self.train.world_size)
        weights = self.train.forward(exporting, 0)
        updating = self.rollout.submit(
            RolloutWorker.update_weights,
            [{"weights": weights, "version": version}] * self.rollout.world_size)
        self.train.wait(exporting)  # a failed export is named by its training rank first
        versions = self.rollout.wait(updating)
        if any(v != version for v in versions):
            raise StepError(
                f"rollout engines report weight versions {versions}, expected {version}"
            )
        self.policy_version = version

    # ================================================================== dispatch
    def balance(self, batch: KVBatchMeta) -> Shards:
        """Sequence-length balancing across data-parallel groups, from tags only.

        One shard per training rank (model-parallel peers, same ``dp_rank``, get the same
        shard). Where the plan keeps groups whole (no critic) every group (uid) lands on one
        data-parallel rank; otherwise samples are balanced one by one.
        """
        groups = max(self.dp_ranks) + 1
        lengths = seq_lengths(batch)
        if self.plan.whole_groups:
            parts = balanced_group_partition(batch.tag_values("uid"), lengths, groups)
            if not all(parts):  # a plan that needs whole groups checked there are enough
                raise StepError(f"{len(set(batch.tag_values('uid')))} group(s) cannot keep "
                                f"{groups} data-parallel ranks busy with whole groups")
        else:
            parts = balanced_equal_partition(lengths, groups)
        return Shards(self.per_rank([batch.select(parts[r]) for r in self.dp_ranks]),
                      max(len(p) for p in parts))

    def group_shards(self, batch: KVBatchMeta) -> list[KVBatchMeta]:
        """Group-aware split: every sample of a uid on one rank (group-relative estimators),
        the same split :meth:`balance` makes when the update computes the advantages."""
        lengths = seq_lengths(batch)
        parts = balanced_group_partition(batch.tag_values("uid"), lengths, self.train.world_size)
        return [batch.select(p) for p in parts]

    @staticmethod
    def per_rank(shards: list[KVBatchMeta]) -> list[dict[str, Any]]:
        return [{"meta": s} for s in shards]

    # ================================================================== bookkeeping
    def begin_step(self) -> None:
        self.meter.reset()
        self.timer.reset()
        self.producer.clears.next_step()

    def update_kl_controller(self, merged: dict[str, mr.Partial]) -> None:
        if "actor/kl" in merged and merged["actor/kl"][1] > 0:
            s, c, _, _ = merged["actor/kl"]
            self.kl_ctl.update(s / c, self.derived.samples_per_step)

    def dump_rollouts(self, batch: KVBatchMeta, step: int) -> None:
        """Decoded samples of this step to ``rollouts/step_N.jsonl`` (written by a worker)."""
        count = min(self.recipe.logging.rollout_dump_samples, len(batch))
        if count == 0 or self.run_dir is None:
            return
        path = f"{self.run_dir}/rollouts/step_{step}.jsonl"
        self.rollout.call_rank(0, RolloutWorker.dump_samples,
                               meta=batch.select(list(range(count))), path=path)

    def close(self, *, quiet: bool = False) -> None:
        """Wait for the data-plane clears still in flight (before the plane closes);
        ``quiet``: the run already failed, so a clear's error is not raised over it."""
        from rlctl.trainer.controller.background_clears import ClearError

        try:
            self.producer.clears.close()
        except ClearError:
            if not quiet:
                raise

    # ================================================================== validation
    def validate(self, step: int) -> dict[str, float]:
        """The val partition through the same producer shape and reward path, no update."""
        if self.validation is None:
            return {}
        batch, _ = self.validation.batch_for(step, self.policy_version)
        partials = self.train.call(TrainingWorker.score_partials,
                                   self.per_rank(self.group_shards(batch)))
        self.validation.release(batch)
        from rlctl.algorithms.accuracy import accuracy_metrics

        merged = mr.merge(partials)
        accuracy = {k: merged.pop(k) for k in list(merged) if k.startswith(("pass@", "mean@"))}
        out = mr.finalize(merged, with_extremes=("critic/score", "response_length"))
        out.update(accuracy_metrics(accuracy))  # pass@1 / mean@k / pass@k, 95% intervals
        return {f"val/{k.removeprefix('critic/')}": v for k, v in out.items()}

    # ================================================================== metrics
    def step_metrics(
        self, merged: dict[str, mr.Partial], batch: KVBatchMeta, produced: dict[str, float],
        step_s: float,
    ) -> dict[str, float]:
        metrics = mr.finalize(merged, with_extremes=EXTREME_METRICS)
        samples = max(len(batch), 1)
        tokens = sum(int(t["seq_len"]) for t in batch.tags)
        metrics.update({f"timing_s/{k}": v for k, v in self.timer.timings.items()})
        metrics["timing_s/step"] = step_s
        metrics["perf/throughput"] = tokens / step_s / max(self.train.world_size, 1)
        metrics["perf/total_num_tokens"] = float(tokens)
        metrics["perf/controller_bytes"] = float(self.meter.total)
        metrics["perf/controller_bytes_per_sample"] = self.meter.total / samples
        metrics["rollout/failures"] = produced.pop("rollout/failures")
        metrics["actor/kl_coef"] = float(self.kl_ctl.value)
        metrics["training/policy_version"] = float(self.policy_version)
        if self.plan.releases_rollout_memory:
            metrics["rollout/memory_released"] = self.memory_released
        metrics.update(produced)  # dynamic_sampling/*, streaming/*, rollout/partial_*
        return metrics
