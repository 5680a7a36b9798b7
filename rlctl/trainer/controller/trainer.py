"""The single controller of the sync trainer.

It holds only :class:`KVBatchMeta` and scalar metrics. One step reads top to bottom like the
algorithm (docs/design.md, "One training step"); each phase is one call on a worker group, which
fetches the
fields it needs from the data plane, computes, and puts its outputs back.
"""

from __future__ import annotations

import re
import time
from contextlib import contextmanager
from typing import Any

from rlctl.config.derived import Derived
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import SamplingParams
from rlctl.protocol.kv import KVBatchMeta
from rlctl.trainer import metric_reduce as mr
from rlctl.trainer.controller.balance import balanced_equal_partition, balanced_group_partition
from rlctl.trainer.controller.prompts import PromptFeeder
from rlctl.trainer.controller.worker_group import TrafficMeter, WorkerError, WorkerGroup
from rlctl.trainer.worker.rollout_worker import RolloutWorker, generate_bound
from rlctl.trainer.worker.training_worker import TrainingWorker

TRAIN, VAL = "train", "val"
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


class Trainer:
    """Runs training steps by dispatching metadata to worker groups."""

    def __init__(
        self,
        recipe: Recipe,
        derived: Derived,
        *,
        plane: Any,
        rollout: WorkerGroup,
        train: WorkerGroup,
        feeder: PromptFeeder,
        val_feeder: PromptFeeder | None,
        replay_buffer: Any,
        meter: TrafficMeter,
        use_object_refs: bool,
        run_dir: Any = None,
        staleness: Any = None,
        reward: WorkerGroup | None = None,
    ) -> None:
        from rlctl.algorithms.kl import make_kl_controller
        from rlctl.trainer.controller.dynamic_sampling import DynamicSampler

        self.recipe = recipe
        self.derived = derived
        self.plane = plane
        self.rollout = rollout
        self.train = train
        self.feeder = feeder
        self.val_feeder = val_feeder
        self.replay = replay_buffer
        self.meter = meter
        self.use_object_refs = use_object_refs
        self.run_dir = run_dir
        self.reward = reward  # reward-model workers; None when no reward is a model
        alg = recipe.algorithm
        self.dynamic = (
            DynamicSampler(alg.dynamic_sampling, alg.prompts_per_step, rollout=rollout,
                           discard=self.cleanup)
            if alg.dynamic_sampling.enabled else None
        )
        self.sampling_stats: dict[str, float] = {}
        self.uses_ref = alg.kl.apply_in != "none"
        self.uses_critic = recipe.critic.enabled
        kl = alg.kl
        self.kl_ctl = make_kl_controller(kl.controller, kl.coef, target=kl.target,
                                         horizon=kl.horizon)
        self.policy_version = 0
        self.timings: dict[str, float] = {}
        from rlctl.trainer.controller.background_clears import BackgroundClears

        # Finished keys leave the data plane while the next step generates.
        self.clears = BackgroundClears(plane, recipe.schedule.phase_timeout_s)
        # A streaming policy keeps later steps generating while this one trains
        # (streaming.py); on_policy (or none) is the sync step below, bit for bit.
        self.stream = None
        if staleness is not None and staleness.streaming:
            from rlctl.trainer.controller.streaming import Stream

            self.stream = Stream(self, staleness)
        from rlctl.registry import get_registry
        from rlctl.trainer.controller.old_log_probs import old_log_prob_pass_needed

        # None: the update is provably on-policy and its own forward gives the old
        # log-probs (old_log_probs.py); else why the step runs the separate forward.
        self.old_log_prob_pass = old_log_prob_pass_needed(
            recipe, get_registry(), streaming=self.stream is not None,
            max_staleness=staleness.max_staleness if staleness is not None else 0)
        # Without a critic nothing reads the advantages between their phase and the actor
        # update, so the update computes them itself from its own read of the step, on shards
        # that keep every group whole: one call, one read and one write fewer per step, the
        # same advantages (the phase runs on whole groups too). ``whole_groups``: the update
        # shards keep groups whole (so the update can); ``advantages_in_update``: it does.
        self.whole_groups = not self.uses_critic
        self.advantages_in_update = self.whole_groups and alg.advantage_pass == "auto"
        # Model-parallel peers (same DP rank) get the same shard; asked before any step so
        # the per-step controller-traffic metric does not depend on when a run started.
        self.dp_ranks = self.read_layout()

    # ================================================================== one step
    def step(self, step: int) -> dict[str, float]:
        """One sync training step; returns its scalar metrics."""
        self.meter.reset()
        self.timings = {}
        self.clears.next_step()
        partials: list[dict[str, mr.Partial]] = []
        started = time.perf_counter()

        if self.stream is not None:
            batch = self.stream.collect(step)  # staleness within the policy's bound
        else:
            with self.timer("gen"):
                batch = self.generate(TRAIN, step, self.sampling(validate=False),
                                      self.recipe.algorithm.group_size)
            self.check_weight_version(batch)
        shards, pad_to, groups_whole = self.balance(batch)
        advantages_here = self.advantages_in_update and groups_whole

        old_from_update = self.old_log_prob_pass is None
        if not old_from_update:
            with self.timer("old_log_prob"):
                partials += self.train.call(TrainingWorker.compute_log_prob,
                                            self.per_rank(shards), role="actor",
                                            field="old_log_probs", pad_to=pad_to,
                                            temperature=self.temperature)
        if self.uses_ref:
            with self.timer("ref"):
                partials += self.train.call(TrainingWorker.compute_log_prob, self.per_rank(shards),
                                            role="ref", field="ref_log_probs", pad_to=pad_to,
                                            temperature=self.temperature)
        if self.uses_critic:
            with self.timer("values"):
                self.train.call(TrainingWorker.compute_values, self.per_rank(shards), pad_to=pad_to)
        if not advantages_here:  # else the actor update computes them (advantages_in_update)
            with self.timer("adv"):
                partials += self.train.call(TrainingWorker.compute_advantage,
                                            self.per_rank(self.group_shards(batch)),
                                            kl_coef=self.kl_ctl.value)
        if self.uses_critic:
            with self.timer("update_critic"):
                partials += self.train.call(TrainingWorker.update_critic, self.per_rank(shards),
                                            pad_to=pad_to, step=step)
        if step > self.recipe.critic.warmup_steps or not self.uses_critic:
            with self.timer("update_actor"):
                partials += self.train.call(TrainingWorker.update_actor, self.per_rank(shards),
                                            pad_to=pad_to, kl_coef=self.kl_ctl.value, step=step,
                                            old_from_update=old_from_update,
                                            advantages_here=advantages_here,
                                            # the next step's prompts, while the ranks train
                                            meanwhile=lambda: self.feed_ahead(step))
        with self.timer("update_weights"):
            self.sync_weights(version=step)

        merged = mr.merge(partials)
        self.update_kl_controller(merged)
        self.dump_rollouts(batch, step)
        self.cleanup(batch)
        metrics = self.step_metrics(merged, batch, time.perf_counter() - started)
        if self.stream is not None:
            metrics.update(self.stream.metrics(batch))
        return metrics

    # ================================================================== phases
    def generate(self, partition: str, step: int, sampling: SamplingParams, n: int) -> KVBatchMeta:
        """The step's scored samples, all terminal; with dynamic sampling (DAPO) only groups
        whose rewards differ, drawn until the step is full."""
        self.rollout_counts: dict[str, mr.Partial] = {}
        if partition == TRAIN and self.dynamic is not None:
            batch, self.sampling_stats = self.dynamic.fill(
                lambda count: self.draw(partition, step, sampling, n, count))
            return batch
        count = (
            self.recipe.algorithm.prompts_per_step
            if partition == TRAIN
            else self.recipe.data.val_size
        )
        return self.draw(partition, step, sampling, n, count)

    def feed_ahead(self, step: int) -> None:
        """Put step ``step + 1``'s prompts into the data plane now (the sync step's first
        draw; streaming dispatches its own, and the last step has no next one)."""
        if self.stream is not None or step >= self.recipe.schedule.total_steps:
            return
        alg = self.recipe.algorithm
        count = self.dynamic.per_draw if self.dynamic is not None else alg.prompts_per_step
        self.feeder.prefetch(count, partition=TRAIN, global_step=step + 1, n=alg.group_size)

    def draw(
        self, partition: str, step: int, sampling: SamplingParams, n: int, count: int
    ) -> KVBatchMeta:
        """``count`` prompts -> rollout -> model rewards -> replay-buffer sample."""
        feeder = self.feeder if partition == TRAIN else self.val_feeder
        prompts = feeder.next_batch(count, partition=partition, global_step=step, n=n)
        # n per uid: the feeder's choice (a task or the choose_group_size hook may vary it)
        self.replay.add(partition, [(uid, int(t["n"]), step)
                                    for uid, t in zip(prompts.keys, prompts.tags, strict=True)])
        chunks = prompts.chunk(self.rollout.world_size)
        pending = self.rollout.submit(
            RolloutWorker.generate,
            [{"prompts": c, "partition": partition, "global_step": step, "sampling": sampling,
              "group_size": n} for c in chunks],
            timeout=generate_bound(self.recipe),
        )
        try:
            batch = self.wait_for_samples(partition, step, [pending])
            counts = self.rollout.wait(pending, timeout=generate_bound(self.recipe))
            # the groups kept from earlier draws
            if len(prompts) < len(set(batch.tag_values("uid"))):
                mine = set(prompts.keys)
                batch = batch.select(
                    [i for i, u in enumerate(batch.tag_values("uid")) if u in mine]
                )
            if self.reward is not None:  # reward models read the prompts' ground truth too
                with self.timer("reward_model"):
                    self.reward.call("score", self.per_rank(batch.chunk(self.reward.world_size)),
                                     prompts=prompts, timeout=self.recipe.schedule.sample_timeout_s)
        finally:
            self.clears.clear(list(prompts.keys), prompts.partition_id)
        drawn = [{k: mr.scalar_partial(v) for k, v in c.items()} for c in counts]
        self.rollout_counts = mr.merge([self.rollout_counts, *drawn])
        return batch

    def wait_for_samples(self, partition: str, step: int, pending: list[Any]) -> KVBatchMeta:
        """The replay buffer's answer for ``step``; fails at once if a rollout worker failed.

        Readiness is pushed by the data plane, so ``sample`` returns within milliseconds of the
        last put; waiting in slices lets a crashed worker (any of the ``pending`` calls)
        surface now, not after the timeout. A session past ``schedule.sample_timeout_s`` is a
        failure naming its uid (the rollout worker cancels it); the wait itself gives up a
        grace period later, naming the uids still missing.
        """
        from rlctl.dataplane import SampleTimeout

        total = generate_bound(self.recipe)
        deadline = time.monotonic() + total
        while True:
            remaining = deadline - time.monotonic()
            try:
                return self.replay.sample(partition, step, timeout=max(min(remaining, 1.0), 0.0))
            except SampleTimeout as exc:
                for p in pending:
                    self.rollout.raise_if_failed(p)
                if time.monotonic() >= deadline:
                    # The last slice's message says "after 1.0 s": state the whole wait.
                    text = re.sub(r"after [0-9.]+ s", f"after {total:.0f} s", str(exc), count=1)
                    stopped = self.rollout.unresponsive()
                    if stopped:  # a stopped worker explains the missing samples best
                        raise WorkerError(
                            f"{', '.join(map(self.rollout.who, stopped))} stopped answering during "
                            f"generate (step {step}): no answer to a liveness check either; {text}"
                        ) from exc
                    raise SampleTimeout(text, exc.missing) from None

    def balance(self, batch: KVBatchMeta) -> tuple[list[KVBatchMeta], int, bool]:
        """Sequence-length balancing across data-parallel groups, from tags only.

        Returns one shard per training rank (model-parallel peers, same ``dp_rank``, get the
        same shard), the rows every rank pads to, and whether each group (uid) is whole on
        one data-parallel rank: with :attr:`whole_groups` groups stay whole unless there
        are fewer groups than ranks, otherwise samples are balanced one by one.
        """
        dp_ranks = self.dp_ranks
        lengths = [int(t["seq_len"]) for t in batch.tags]
        parts: list[list[int]] = []
        if self.whole_groups:
            parts = balanced_group_partition(batch.tag_values("uid"), lengths, max(dp_ranks) + 1)
        groups_whole = bool(parts) and all(parts)
        if not groups_whole:
            parts = balanced_equal_partition(lengths, max(dp_ranks) + 1)
        shards = [batch.select(parts[r]) for r in dp_ranks]
        return shards, max(len(p) for p in parts), groups_whole

    def read_layout(self) -> list[int]:
        """The data-parallel rank of every training rank (asked once, at start-up)."""
        layout = self.train.call(TrainingWorker.layout)
        sizes = {size for _, size, _ in layout}
        ranks = [r for r, _, _ in layout]
        if len(sizes) != 1 or sorted(set(ranks)) != list(range(sizes.pop())):
            raise StepError(f"training ranks report an inconsistent data-parallel layout {layout}")
        return ranks

    def group_shards(self, batch: KVBatchMeta) -> list[KVBatchMeta]:
        """Group-aware split: every sample of a uid on one rank (group-relative estimators),
        the same split :meth:`balance` makes when the update computes the advantages."""
        lengths = [int(t["seq_len"]) for t in batch.tags]
        parts = balanced_group_partition(batch.tag_values("uid"), lengths, self.train.world_size)
        return [batch.select(p) for p in parts]

    def sync_weights(self, version: int) -> None:
        """Actor -> rollout engines, stamped with ``version``.

        Every training rank joins the full-weight gather; rank 0 returns them (in Ray mode as
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

    def check_weight_version(self, batch: KVBatchMeta) -> None:
        stale = {t.get("weight_version") for t in batch.tags} - {self.policy_version}
        if stale:
            raise StepError(
                f"rollouts were generated by weight version(s) {sorted(map(str, stale))}, "
                f"expected {self.policy_version}: the weight sync did not reach every rollout "
                "engine"
            )

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

    def cleanup(self, batch: KVBatchMeta) -> None:
        self.clears.clear(list(batch.keys), batch.partition_id)
        self.replay.remove(batch.partition_id, list(batch.keys))

    def close(self, *, quiet: bool = False) -> None:
        """Wait for the data-plane clears still in flight (before the plane closes);
        ``quiet``: the run already failed, so a clear's error is not raised over it."""
        from rlctl.trainer.controller.background_clears import ClearError

        try:
            self.clears.close()
        except ClearError:
            if not quiet:
                raise

    # ================================================================== validation
    def validate(self, step: int) -> dict[str, float]:
        """The val partition through the same rollout and reward path, without updates."""
        sampling = self.sampling(validate=True)
        batch = self.generate(VAL, step, sampling, self.recipe.rollout.val_group_size)
        partials = self.train.call(TrainingWorker.score_partials,
                                   self.per_rank(self.group_shards(batch)))
        self.cleanup(batch)
        from rlctl.evals.metrics import accuracy_metrics

        merged = mr.merge(partials)
        accuracy = {k: merged.pop(k) for k in list(merged) if k.startswith(("pass@", "mean@"))}
        out = mr.finalize(merged, with_extremes=("critic/score", "response_length"))
        out.update(accuracy_metrics(accuracy))  # pass@1 / mean@k / pass@k, 95% intervals
        return {f"val/{k.removeprefix('critic/')}": v for k, v in out.items()}

    # ================================================================== helpers
    @property
    def temperature(self) -> float:
        return self.recipe.rollout.temperature or 1.0

    def sampling(self, *, validate: bool) -> SamplingParams:
        return SamplingParams.from_recipe(self.recipe, validation=validate)

    @staticmethod
    def per_rank(shards: list[KVBatchMeta]) -> list[dict[str, Any]]:
        return [{"meta": s} for s in shards]

    @contextmanager
    def timer(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0

    def step_metrics(
        self, merged: dict[str, mr.Partial], batch: KVBatchMeta, step_s: float
    ) -> dict[str, float]:
        metrics = mr.finalize(merged, with_extremes=EXTREME_METRICS)
        samples = max(len(batch), 1)
        tokens = sum(int(t["seq_len"]) for t in batch.tags)
        metrics.update({f"timing_s/{k}": v for k, v in self.timings.items()})
        metrics["timing_s/step"] = step_s
        metrics["perf/throughput"] = tokens / step_s / max(self.train.world_size, 1)
        metrics["perf/total_num_tokens"] = float(tokens)
        metrics["perf/controller_bytes"] = float(self.meter.total)
        metrics["perf/controller_bytes_per_sample"] = self.meter.total / samples
        metrics["rollout/failures"] = self.rollout_counts.get("failures", (0, 1, 0, 0))[0]
        metrics["actor/kl_coef"] = float(self.kl_ctl.value)
        metrics["training/policy_version"] = float(self.policy_version)
        metrics.update(self.sampling_stats)  # dynamic_sampling/*: groups drawn, kept, draws
        return metrics
