"""The rollout producer: the one place a step's samples come from.

The trainer asks one question, :meth:`RolloutProducer.batch_for` (step ``t``'s batch and its
metrics); the producer owns everything behind the answer: the prompt feeder, the replay
buffer, the dispatches in flight, reward-model scoring, dynamic-sampling refills and the
staleness policy. Its loop, for step ``t``:

1. **dispatch** ``t``'s prompts, and every later step the staleness policy admits (up to
   ``t + policy.lookahead``: the rollout workers' ``generate`` is *submitted*, not waited for);
2. **wait** for every group dispatched for ``t`` (the replay buffer's bounded wait; a crashed
   rollout worker of any dispatch in flight surfaces at once);
3. **score** the newly finished groups with the reward models (their own worker group), then
   clear their prompts;
4. **evict** the groups the policy finds too stale (they are dropped and refilled);
5. **filter** (DAPO's dynamic sampling) the new groups whose metric does not vary;
6. **refill** what eviction dropped, or a new draw while the filter keeps too few, and go back
   to 2; else **select** the groups the policy trains.

Sync training is the ``on_policy`` policy: lookahead 0, nothing evicted, every group of the
step selected: exactly the draw -> generate -> wait the sync trainer always ran. Streaming is a
policy with lookahead; it combines with dynamic sampling and with reward models like sync.
Weights reach the rollout engines after each update (the trainer's ``sync_weights``), so
generation already queued runs on whatever version the engines hold when it starts; each
sample's tags say which (``weight_version_min`` / ``weight_version_max``) and for which step it
was dispatched (``dispatch_step``). docs/streaming.md has the timeline of a step.

Controller state is metadata only: the dispatches in flight (prompt keys and pending handles),
in dispatch order. :meth:`checkpoint` waits for them and has a rollout worker save their
finished samples; :meth:`restore` puts them back, so a resumed run trains exactly what the
interrupted one would have.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlctl.algorithms.staleness import GroupState, StalenessPolicy, StalenessViolation
from rlctl.engines.rollout.contract import SamplingParams
from rlctl.protocol.kv import KVBatchMeta
from rlctl.trainer import metric_reduce as mr
from rlctl.trainer.controller.dynamic_sampling import DynamicSampler
from rlctl.trainer.controller.step_timer import StepTimer
from rlctl.trainer.controller.worker_group import WorkerError, WorkerGroup
from rlctl.trainer.worker.reward_worker import RewardWorker
from rlctl.trainer.worker.rollout_worker import RolloutWorker


@dataclass(frozen=True)
class ProducerSettings:
    """What a producer draws and how long it may wait (one per partition)."""

    partition: str
    """``train`` or ``val``."""
    groups: int
    """Groups a batch holds (prompts per step; ``data.val_size`` for validation)."""
    group_size: int
    """Sessions per prompt unless a task or plugin chooses per prompt."""
    sampling: SamplingParams
    """How responses are sampled."""
    bound_s: float
    """How long one ``generate`` call, or a wait for its samples, may take."""
    last_step: int
    """No step past it is dispatched ahead."""
    partial_rollout: bool = False
    """Samples carry partial-rollout segments (their metrics are reported)."""


@dataclass
class Dispatch:
    """One ``generate`` of prompts for a step: submitted, then completed."""

    step: int
    uids: tuple[str, ...]
    group_size: int
    prompts: KVBatchMeta | None  # None once completed (its prompts cleared) or restored
    pending: Any  # None once its counts are in
    counts: list[dict[str, float]] = field(default_factory=list)


@dataclass
class _Collected:
    """Step ``t``'s groups while :meth:`RolloutProducer.batch_for` collects them."""

    kept: list[KVBatchMeta] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    dropped: int = 0
    reward_parts: dict[str, mr.Partial] = field(default_factory=dict)
    """The model rewards' extra components (``reward/<name>/<part>``) of every sample scored."""

    @property
    def uids(self) -> set[str]:
        return {u for part in self.kept for u in part.tag_values("uid")}


class RolloutProducer:
    """Answers :meth:`batch_for` (see the module docstring)."""

    def __init__(self, settings: ProducerSettings, *, plane: Any, rollout: WorkerGroup,
                 feeder: Any, replay: Any, policy: StalenessPolicy, timer: StepTimer,
                 clears: Any, reward: WorkerGroup | None = None,
                 dynamic: DynamicSampler | None = None,
                 policy_label: str = "the staleness policy") -> None:
        """``policy_label``: how errors name the policy (its name, plugin and where its
        class is defined)."""
        self.settings = settings
        self.plane = plane
        self.rollout = rollout
        self.reward = reward
        self.feeder = feeder
        self.replay = replay
        self.policy = policy
        self.policy_label = policy_label
        self.timer = timer
        self.clears = clears
        self.dynamic = dynamic
        self.per_draw = dynamic.per_draw if dynamic is not None else settings.groups
        self.in_flight: list[Dispatch] = []
        self.next_dispatch: int | None = None

    # ------------------------------------------------------------------ one step
    def batch_for(self, step: int, version: int) -> tuple[KVBatchMeta, dict[str, float]]:
        """Step ``step``'s batch (whole groups, none past the policy's bound) and its
        metrics; ``version``: the weights the rollout engines hold now."""
        self._dispatch_ahead(step, version)
        got, counts, draws = _Collected(), [], 1
        drawn = varied = 0
        while True:
            batch = self._wait_step(step)
            counts += self._complete_step(step, batch, got)
            new = batch.select(lambda _k, tags: tags["uid"] not in got.seen)
            got.seen.update(new.tag_values("uid"))
            evicted = self._evict(got, new, version)
            new = new.select(lambda _k, tags, e=evicted: tags["uid"] not in e)
            drawn += len(set(new.tag_values("uid")))
            refill = len(evicted)
            if self.dynamic is None:
                got.kept.append(new)
            else:
                keep, drop, signal = self.dynamic.split(new, self.settings.groups - len(got.uids))
                varied += signal
                self.release(drop)
                got.kept.append(keep)
                short = len(got.uids) < self.settings.groups
                if short and draws >= self.dynamic.max_draws:
                    self._give_up(got)
                    raise self.dynamic.exhausted(len(got.uids), drawn, varied)
                refill, draws = (self.per_draw, draws + 1) if short else (0, draws)
            if not refill:
                break
            self._dispatch(step, refill)
        batch = self._select(KVBatchMeta.concat(got.kept), version)
        return batch, self._metrics(batch, counts, got, version, (draws, drawn, varied))

    def prefetch(self, step: int) -> None:
        """Feed the prompts of the next dispatch into the data plane now (called while the
        ranks train): the next step's draw, unless it is already in flight."""
        upcoming = step + 1 if self.next_dispatch is None else max(self.next_dispatch, step + 1)
        if upcoming > self.settings.last_step:
            return
        self.feeder.prefetch(self.per_draw, partition=self.settings.partition,
                             global_step=upcoming, n=self.settings.group_size)

    def release(self, batch: KVBatchMeta) -> None:
        """The samples of ``batch`` leave the data plane (in the background) and the replay
        buffer: trained, dropped or evicted."""
        if len(batch) == 0:
            return
        self.clears.clear(list(batch.keys), batch.partition_id)
        self.replay.remove(batch.partition_id, list(batch.keys))

    # ------------------------------------------------------------------ dispatching
    def _dispatch_ahead(self, step: int, version: int) -> None:
        """Dispatch ``step`` and every later step the policy admits now."""
        if self.next_dispatch is None or self.next_dispatch < step:
            self.next_dispatch = step
        while (self.next_dispatch <= min(step + self.policy.lookahead, self.settings.last_step)
               and (self.next_dispatch == step
                    or self.policy.admit(self.next_dispatch, version))):
            self._dispatch(self.next_dispatch, self.per_draw)
            self.next_dispatch += 1

    def _dispatch(self, step: int, count: int) -> None:
        """Draw ``count`` prompts for ``step`` and submit their generation (not waited for)."""
        s = self.settings
        prompts = self.feeder.next_batch(count, partition=s.partition, global_step=step,
                                         n=s.group_size)
        # n per uid: the feeder's choice (a task or the choose_group_size hook may vary it)
        self.replay.add(s.partition, [(uid, int(tags["n"]), step)
                                      for uid, tags in zip(prompts.keys, prompts.tags,
                                                           strict=True)])
        pending = self.rollout.submit(
            RolloutWorker.generate,
            [{"prompts": c, "partition": s.partition, "global_step": step,
              "sampling": s.sampling, "group_size": s.group_size}
             for c in prompts.chunk(self.rollout.world_size)],
            timeout=s.bound_s,
        )
        self.in_flight.append(Dispatch(step, tuple(prompts.keys), s.group_size, prompts,
                                       pending))

    # ------------------------------------------------------------------ waiting
    def _wait_step(self, step: int) -> KVBatchMeta:
        """Every group of ``step``, all terminal; fails at once if a rollout worker of any
        dispatch in flight failed.

        Readiness is pushed by the data plane, so ``sample`` returns within milliseconds of
        the last put; waiting in slices lets a crashed worker surface now, not after the
        bound. A session past ``schedule.sample_timeout_s`` is a failure naming its uid (the
        rollout worker cancels it); the wait itself gives up a grace period later, naming
        the uids still missing.
        """
        from rlctl.dataplane import SampleTimeout

        pending = [d.pending for d in self.in_flight if d.pending is not None]
        total = self.settings.bound_s
        deadline = time.monotonic() + total
        while True:
            remaining = deadline - time.monotonic()
            try:
                return self.replay.sample(self.settings.partition, step,
                                          timeout=max(min(remaining, 1.0), 0.0))
            except SampleTimeout as exc:
                for p in pending:
                    self.rollout.raise_if_failed(p)
                if time.monotonic() >= deadline:
                    raise self._timed_out(step, exc, total) from None

    def _timed_out(self, step: int, exc: Any, total: float) -> Exception:
        from rlctl.dataplane import SampleTimeout

        # The last slice's message says "after 1.0 s": state the whole wait.
        text = re.sub(r"after [0-9.]+ s", f"after {total:.0f} s", str(exc), count=1)
        stopped = self.rollout.unresponsive()
        if stopped:  # a stopped worker explains the missing samples best
            return WorkerError(
                f"{', '.join(map(self.rollout.who, stopped))} stopped answering during "
                f"generate (step {step}): no answer to a liveness check either; {text}")
        return SampleTimeout(text, exc.missing)

    def _complete_step(self, step: int, batch: KVBatchMeta,
                       got: _Collected) -> list[dict[str, float]]:
        """Complete ``step``'s dispatches whose samples ``batch`` holds; their counts."""
        counts: list[dict[str, float]] = []
        for d in [d for d in self.in_flight if d.step == step]:
            if d.prompts is not None:
                mine = set(d.uids)
                parts = self._complete(d, batch.select(lambda _k, tags, m=mine: tags["uid"] in m))
                got.reward_parts = mr.merge([got.reward_parts, parts])
            counts += d.counts
        self.in_flight = [d for d in self.in_flight if d.step != step]
        return counts

    def _complete(self, d: Dispatch, samples: KVBatchMeta) -> dict[str, mr.Partial]:
        """Collect one dispatch's counts, score its samples with the reward models (they read
        the prompts' ground truth), then clear its prompts; the model rewards' components."""
        try:
            if d.pending is not None:
                d.counts = self.rollout.wait(d.pending, timeout=self.settings.bound_s)
                d.pending = None
            if self.reward is None or not len(samples):
                return {}
            with self.timer("reward_model"):
                parts = self.reward.call(
                    RewardWorker.score, [{"meta": s} for s in
                                         samples.chunk(self.reward.world_size)],
                    prompt_partition=d.prompts.partition_id, timeout=self.settings.bound_s)
            return mr.merge(parts)
        finally:
            self.clears.clear(list(d.prompts.keys), d.prompts.partition_id)
            d.prompts = None

    # ------------------------------------------------------------------ choosing
    def _evict(self, got: _Collected, new: KVBatchMeta, version: int) -> set[str]:
        """Uids the policy drops as too stale, of every group of the step so far; their
        samples are released."""
        candidates = [*got.kept, new]
        evicted = {g.uid for g in self.policy.evict(
            groups_of(KVBatchMeta.concat(candidates)), version)}
        if not evicted:
            return evicted
        for i, part in enumerate(got.kept):
            self.release(part.select(lambda _k, tags: tags["uid"] in evicted))
            got.kept[i] = part.select(lambda _k, tags: tags["uid"] not in evicted)
        self.release(new.select(lambda _k, tags: tags["uid"] in evicted))
        got.dropped += len(evicted)
        return evicted

    def _give_up(self, got: _Collected) -> None:
        for part in got.kept:
            self.release(part)

    def _select(self, batch: KVBatchMeta, version: int) -> KVBatchMeta:
        """The groups the policy trains, none past its bound (a policy that lets one through
        broke its contract: the step fails naming it)."""
        chosen = {g.uid for g in self.policy.select(groups_of(batch), self.settings.groups)}
        out = batch.select(lambda _k, tags: tags["uid"] in chosen)
        worst = max((version - int(t["weight_version_min"]) for t in out.tags), default=0)
        if worst > self.policy.max_staleness:
            raise StalenessViolation(
                f"{self.policy_label} selected a group {worst} weight update(s) old, past its "
                f"own bound max_staleness = {self.policy.max_staleness}: its select() must "
                "return only groups evict() keeps")
        return out

    # ------------------------------------------------------------------ metrics
    def _metrics(self, batch: KVBatchMeta, counts: list[dict[str, float]], got: _Collected,
                 version: int, draws: tuple[int, int, int]) -> dict[str, float]:
        # the rollout workers' idle time (waiting for work, i.e. for the trainer), per worker
        idle = sum(c.pop("idle_s", 0.0) for c in counts) / max(self.rollout.world_size, 1)
        self.timer.add("wait_train", idle)
        merged = mr.merge([{k: mr.scalar_partial(v) for k, v in c.items()} for c in counts])
        out = {"rollout/failures": merged.get("failures", (0.0, 1.0, 0.0, 0.0))[0]}
        out.update(mr.finalize(got.reward_parts))  # reward/<model>/<component>
        if self.dynamic is not None:
            gen_batches, drawn, varied = draws
            out.update({"dynamic_sampling/groups_drawn": float(drawn),
                        "dynamic_sampling/groups_kept": float(varied),
                        "dynamic_sampling/gen_batches": float(gen_batches)})
        if self.policy.lookahead > 0 or self.policy.max_staleness > 0:
            ages = [version - int(t["weight_version_min"]) for t in batch.tags] or [0]
            out.update({
                "streaming/staleness_mean": sum(ages) / len(ages),
                "streaming/staleness_max": float(max(ages)),
                "streaming/dropped_groups": float(got.dropped),
                "streaming/in_flight": float(sum(len(d.uids) for d in self.in_flight)),
            })
        if self.settings.partial_rollout:
            out.update(partial_metrics(batch))
        return out

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, out_dir: Path) -> dict[str, Any]:
        """The producer's state for a checkpoint; finished samples go to ``out_dir``.

        Completes every dispatch in flight first (each bounded like any ``generate`` call),
        so what is saved is scored and complete, and the rollout engines' sampler state
        (saved after this) follows it.
        """
        partition = self.settings.partition
        uids = {u for d in self.in_flight for u in d.uids}
        for d in self.in_flight:
            if d.pending is not None:
                d.counts = self.rollout.wait(d.pending, timeout=self.settings.bound_s)
                d.pending = None
        listing = self.plane.kv_list(partition) if uids else {}
        keys = [k for k, tags in listing.items() if tags.get("uid") in uids]
        meta = KVBatchMeta(tuple(keys), partition, tuple(listing[k] for k in keys))
        for d in self.in_flight:
            if d.prompts is not None:
                mine = set(d.uids)
                self._complete(d, meta.select(lambda _k, tags, m=mine: tags["uid"] in m))
        if keys:
            fields = sorted(set().union(*self.rollout.call(RolloutWorker.sample_fields)))
            self.rollout.call_rank(0, RolloutWorker.save_samples, meta=meta, fields=fields,
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
        their uids expected again by the replay buffer, dispatches in flight again (done)."""
        if state.get("samples"):
            self.rollout.call_rank(0, RolloutWorker.load_samples, path=str(in_dir))
        self.in_flight = []
        for d in state.get("in_flight", []):
            uids, n, step = tuple(d["uids"]), int(d["group_size"]), int(d["step"])
            self.replay.add(self.settings.partition, [(uid, n, step) for uid in uids])
            self.in_flight.append(Dispatch(step, uids, n, None, None, list(d["counts"])))
        self.next_dispatch = state.get("next_dispatch")
        self.policy.load_state_dict(state.get("policy", {}))


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


def groups_of(batch: KVBatchMeta) -> list[GroupState]:
    """One :class:`GroupState` per uid, in first-seen order, from the samples' tags."""
    out: dict[str, list[int]] = {}
    for tg in batch.tags:
        lo, hi = int(tg["weight_version_min"]), int(tg["weight_version_max"])
        seen = out.setdefault(tg["uid"], [int(tg["dispatch_step"]), lo, hi])
        seen[1], seen[2] = min(seen[1], lo), max(seen[2], hi)
    return [GroupState(uid, s, lo, hi) for uid, (s, lo, hi) in out.items()]
