"""The streaming scheduler: prompts of later steps generate while step ``t`` trains.

The trainer asks :meth:`Stream.collect` for step ``t``'s batch instead of generating it.
``collect`` first dispatches every step the staleness policy admits (up to
``t + lookahead``: the rollout workers' ``generate`` is *submitted*, not waited for), then
waits for step ``t``'s groups, drops the ones the policy evicts as too stale, refills exactly
as many prompts, and returns the groups the policy selects. Weights reach the rollout
engines after each update (the trainer's ``sync_weights``), so generation already queued
runs on whatever version the engines hold when it starts; each sample's tags say which
(``weight_version_min`` / ``weight_version_max``) and for which step it was dispatched
(``dispatch_step``). See docs/streaming.md for the timeline of one step.

Controller state is metadata only: the in-flight dispatches (prompt keys and their pending
handles), kept in dispatch order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rlctl.algorithms.staleness import GroupState, StalenessPolicy
from rlctl.protocol.kv import KVBatchMeta
from rlctl.trainer import metric_reduce as mr
from rlctl.trainer.worker.rollout_worker import RolloutWorker

TRAIN = "train"


class StalenessViolation(RuntimeError):
    """A selected group is past the policy's bound: the policy (a plugin) broke its contract."""


@dataclass
class _Dispatch:
    step: int
    prompts: KVBatchMeta
    pending: Any
    counts: list[dict[str, float]] = field(default_factory=list)


class Stream:
    """Keeps up to ``policy.lookahead`` steps of prompts in flight for one trainer."""

    def __init__(self, trainer: Any, policy: StalenessPolicy) -> None:
        self.t = trainer
        self.policy = policy
        self.in_flight: list[_Dispatch] = []
        self.next_dispatch: int | None = None
        self.step_stats: dict[str, float] = {}

    # ------------------------------------------------------------------ one step
    def collect(self, step: int) -> KVBatchMeta:
        """Step ``step``'s batch: whole groups the policy selected, none past its bound."""
        t = self.t
        self.step_stats = {"dropped_groups": 0.0}
        with t.timer("dispatch"):
            self.dispatch_ahead(step)
        dropped = 0
        with t.timer("wait_rollout"):
            while True:
                batch = self.wait_for_step(step)
                groups = groups_of(batch)
                evicted = self.policy.evict(groups, t.policy_version)
                if not evicted:
                    break
                # Too old to train: drop those groups, refill exactly as many prompts (for
                # this step, so they generate on the newest weights) and wait again.
                t.cleanup(self.keep(batch, evicted))
                dropped += len(evicted)
                self.dispatch(step, len(evicted))
            counts = self.finish(step)
        selected = self.policy.select(groups, t.recipe.algorithm.prompts_per_step)
        batch = self.keep(batch, selected)
        self.check(batch)
        t.rollout_counts = mr.merge(
            [{k: mr.scalar_partial(v) for k, v in c.items()} for c in counts])
        self.step_stats["dropped_groups"] = float(dropped)
        return batch

    def dispatch_ahead(self, step: int) -> None:
        """Dispatch ``step`` and every later step the policy admits now."""
        total = self.t.recipe.schedule.total_steps
        if self.next_dispatch is None or self.next_dispatch < step:
            self.next_dispatch = step
        while (self.next_dispatch <= min(step + self.policy.lookahead, total)
               and (self.next_dispatch == step
                    or self.policy.admit(self.next_dispatch, self.t.policy_version))):
            self.dispatch(self.next_dispatch, self.t.recipe.algorithm.prompts_per_step)
            self.next_dispatch += 1

    def dispatch(self, step: int, count: int) -> None:
        """Draw ``count`` prompts for ``step`` and submit their generation (not waited for)."""
        t = self.t
        n = t.recipe.algorithm.group_size
        prompts = t.feeder.next_batch(count, partition=TRAIN, global_step=step, n=n)
        # n per uid: the feeder's choice (a task or the choose_group_size hook may vary it)
        t.replay.add(TRAIN, [(uid, int(tags["n"]), step)
                             for uid, tags in zip(prompts.keys, prompts.tags, strict=True)])
        sampling = t.sampling(validate=False)
        pending = t.rollout.submit(
            RolloutWorker.generate,
            [{"prompts": c, "partition": TRAIN, "global_step": step, "sampling": sampling,
              "group_size": n} for c in prompts.chunk(t.rollout.world_size)],
        )
        self.in_flight.append(_Dispatch(step, prompts, pending))

    def wait_for_step(self, step: int) -> KVBatchMeta:
        """Every group of ``step``, bounded by ``schedule.sample_timeout_s`` (SampleTimeout
        names the missing uids); a crashed rollout worker surfaces within a second."""
        from rlctl.dataplane import SampleTimeout

        t = self.t
        deadline = time.monotonic() + t.recipe.schedule.sample_timeout_s
        while True:
            remaining = deadline - time.monotonic()
            try:
                return t.replay.sample(TRAIN, step, timeout=max(min(remaining, 1.0), 0.0))
            except SampleTimeout:
                for d in self.in_flight:
                    t.rollout.raise_if_failed(d.pending)
                if time.monotonic() >= deadline:
                    raise

    def finish(self, step: int) -> list[dict[str, float]]:
        """Collect the counts of ``step``'s dispatches and clear their prompts."""
        t = self.t
        done = [d for d in self.in_flight if d.step == step]
        self.in_flight = [d for d in self.in_flight if d.step != step]
        counts: list[dict[str, float]] = []
        for d in done:
            try:
                counts += t.rollout.wait(d.pending, timeout=t.recipe.schedule.sample_timeout_s)
            finally:
                t.plane.kv_clear(list(d.prompts.keys), d.prompts.partition_id)
        # the rollout workers' idle time (waiting for work, i.e. for the trainer), per worker
        idle = sum(c.pop("idle_s", 0.0) for c in counts) / max(t.rollout.world_size, 1)
        t.timings["wait_train"] = t.timings.get("wait_train", 0.0) + idle
        return counts

    @staticmethod
    def keep(batch: KVBatchMeta, selected: list[GroupState]) -> KVBatchMeta:
        chosen = {g.uid for g in selected}
        return batch.select(lambda _k, tags: tags["uid"] in chosen)

    def check(self, batch: KVBatchMeta) -> None:
        version = self.t.policy_version
        worst = max((version - int(tg["weight_version_min"]) for tg in batch.tags), default=0)
        if worst > self.policy.max_staleness:
            raise StalenessViolation(
                f"a selected group is {worst} weight updates old, past the bound "
                f"max_staleness = {self.policy.max_staleness}")

    # ------------------------------------------------------------------ metrics
    def metrics(self, batch: KVBatchMeta) -> dict[str, float]:
        version = self.t.policy_version - 1  # the step's update has already been applied
        ages = [version - int(tg["weight_version_min"]) for tg in batch.tags] or [0]
        return {
            "streaming/staleness_mean": sum(ages) / len(ages),
            "streaming/staleness_max": float(max(ages)),
            "streaming/dropped_groups": self.step_stats.get("dropped_groups", 0.0),
            "streaming/in_flight": float(sum(len(d.prompts) for d in self.in_flight)),
        }


def groups_of(batch: KVBatchMeta) -> list[GroupState]:
    """One :class:`GroupState` per uid, in first-seen order, from the samples' tags."""
    out: dict[str, list[int]] = {}
    for tg in batch.tags:
        lo, hi = int(tg["weight_version_min"]), int(tg["weight_version_max"])
        seen = out.setdefault(tg["uid"], [int(tg["dispatch_step"]), lo, hi])
        seen[1], seen[2] = min(seen[1], lo), max(seen[2], hi)
    return [GroupState(uid, s, lo, hi) for uid, (s, lo, hi) in out.items()]
