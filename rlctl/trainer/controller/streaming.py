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
handles), kept in dispatch order. A checkpoint (:meth:`Stream.checkpoint`) waits for them,
has a rollout worker save their finished samples, and records the dispatches (uids, steps,
counts), the next step to dispatch and the policy's state; :meth:`Stream.restore` puts the
samples back, so a resumed run trains exactly what the interrupted one would have.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlctl.algorithms.staleness import GroupState, StalenessPolicy
from rlctl.protocol.kv import KeyFormatError, KVBatchMeta, parse_key
from rlctl.trainer import metric_reduce as mr
from rlctl.trainer.worker.rollout_worker import RolloutWorker, generate_bound

TRAIN = "train"


class StalenessViolation(RuntimeError):
    """A selected group is past the policy's bound: the policy (a plugin) broke its contract."""


@dataclass
class _Dispatch:
    step: int
    uids: tuple[str, ...]
    group_size: int
    prompts: KVBatchMeta | None  # None once generated and cleared (or restored)
    pending: Any  # None once waited for
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
            timeout=generate_bound(t.recipe),
        )
        self.in_flight.append(_Dispatch(step, tuple(prompts.keys), n, prompts, pending))

    def wait_for_step(self, step: int) -> KVBatchMeta:
        """Every group of ``step``: the trainer's bounded wait (a session past
        ``schedule.sample_timeout_s`` fails naming its uid; SampleTimeout names the uids still
        missing), watching every dispatch in flight for a crashed rollout worker."""
        pending = [d.pending for d in self.in_flight if d.pending is not None]
        return self.t.wait_for_samples(TRAIN, step, pending)

    def finish(self, step: int) -> list[dict[str, float]]:
        """Collect the counts of ``step``'s dispatches and clear their prompts."""
        t = self.t
        done = [d for d in self.in_flight if d.step == step]
        self.in_flight = [d for d in self.in_flight if d.step != step]
        counts: list[dict[str, float]] = []
        for d in done:
            self.wait(d)
            counts += d.counts
        # the rollout workers' idle time (waiting for work, i.e. for the trainer), per worker
        idle = sum(c.pop("idle_s", 0.0) for c in counts) / max(t.rollout.world_size, 1)
        t.timings["wait_train"] = t.timings.get("wait_train", 0.0) + idle
        return counts

    def wait(self, d: _Dispatch) -> None:
        """Wait for one dispatch's generation (bounded), keep its counts, clear its prompts."""
        t = self.t
        try:
            if d.pending is not None:
                d.counts = t.rollout.wait(d.pending, timeout=generate_bound(t.recipe))
                d.pending = None
        finally:
            if d.prompts is not None:
                t.plane.kv_clear(list(d.prompts.keys), d.prompts.partition_id)
                d.prompts = None

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, out_dir: Path) -> dict[str, Any]:
        """The stream's state for a checkpoint; finished samples go to ``out_dir``.

        Waits for every in-flight generation first (each bounded like any ``generate``
        call: ``schedule.sample_timeout_s`` plus a grace), so what is saved is complete and
        the rollout engines' sampler state (saved after this) follows it.
        """
        t = self.t
        for d in self.in_flight:
            self.wait(d)
        uids = {u for d in self.in_flight for u in d.uids}
        listing = t.plane.kv_list(TRAIN)
        keys = [k for k in listing if _uid_of(k) in uids]
        if keys:
            fields = sorted(set().union(*t.rollout.call(RolloutWorker.sample_fields)))
            meta = KVBatchMeta(tuple(keys), TRAIN, tuple(listing[k] for k in keys))
            t.rollout.call_rank(0, RolloutWorker.save_samples, meta=meta, fields=fields,
                                path=str(out_dir))
        return {
            "next_dispatch": self.next_dispatch,
            "in_flight": [{"step": d.step, "uids": list(d.uids), "group_size": d.group_size,
                           "counts": d.counts} for d in self.in_flight],
            "samples": len(keys),
            "policy": self.policy.state_dict(),
        }

    def restore(self, state: dict[str, Any], in_dir: Path) -> None:
        """Undo :meth:`checkpoint` in a fresh session: samples back into the data plane,
        their uids expected again by the replay buffer, dispatches in flight again."""
        t = self.t
        if state.get("samples"):
            t.rollout.call_rank(0, RolloutWorker.load_samples, path=str(in_dir))
        self.in_flight = []
        for d in state.get("in_flight", []):
            uids, n, step = tuple(d["uids"]), int(d["group_size"]), int(d["step"])
            t.replay.add(TRAIN, [(uid, n, step) for uid in uids])
            self.in_flight.append(_Dispatch(step, uids, n, None, None, list(d["counts"])))
        self.next_dispatch = state.get("next_dispatch")
        self.policy.load_state_dict(state.get("policy", {}))

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
        out = {
            "streaming/staleness_mean": sum(ages) / len(ages),
            "streaming/staleness_max": float(max(ages)),
            "streaming/dropped_groups": self.step_stats.get("dropped_groups", 0.0),
            "streaming/in_flight": float(sum(len(d.uids) for d in self.in_flight)),
        }
        if self.t.recipe.algorithm.staleness.partial_rollout == "resume":
            out.update(partial_metrics(batch))
        return out


def partial_metrics(batch: KVBatchMeta) -> dict[str, float]:
    """Partial rollouts, over the step's trained samples: requests aborted at a weight update,
    requests resumed on new weights, and weight-version segments per sample (1 = generated on
    one version throughout)."""
    tags = [tg for tg in batch.tags if "weight_segments" in tg]
    return {
        "rollout/partial_aborts": float(sum(int(tg["partial_aborts"]) for tg in tags)),
        "rollout/partial_resumes": float(sum(int(tg["partial_resumes"]) for tg in tags)),
        "rollout/partial_segments_mean":
            sum(len(tg["weight_segments"]) for tg in tags) / max(len(tags), 1),
    }


def _uid_of(key: str) -> str | None:
    try:
        return parse_key(key)[0]
    except KeyFormatError:
        return None  # not a sample key


def groups_of(batch: KVBatchMeta) -> list[GroupState]:
    """One :class:`GroupState` per uid, in first-seen order, from the samples' tags."""
    out: dict[str, list[int]] = {}
    for tg in batch.tags:
        lo, hi = int(tg["weight_version_min"]), int(tg["weight_version_max"])
        seen = out.setdefault(tg["uid"], [int(tg["dispatch_step"]), lo, hi])
        seen[1], seen[2] = min(seen[1], lo), max(seen[2], hi)
    return [GroupState(uid, s, lo, hi) for uid, (s, lo, hi) in out.items()]
