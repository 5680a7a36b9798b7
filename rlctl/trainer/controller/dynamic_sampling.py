"""DAPO's dynamic sampling on the controller: draw prompts, keep the groups with a signal,
draw again until the step is full (``[algorithm.dynamic_sampling]``).

A group whose responses all have the same ``metric`` (all right, all wrong) gets zero
group-relative advantage and so no gradient; DAPO drops such groups and fills the batch with
fresh prompts instead, so that every step trains on ``prompts_per_step`` groups that carry
one. This follows verl's ``filter_groups``: draws of ``prompts_per_draw`` prompts (its
``gen_batch_size``), a group kept when its std is above 0, the batch filled in draw order and
cut to ``prompts_per_step`` groups, and at most ``max_draws`` draws (``max_num_gen_batches``),
after which the step fails. Unlike verl there is always a cap: every wait has a bound.

The controller sees only uids: a rollout worker reads the metric from the data plane
(:mod:`rlctl.trainer.worker.group_filter`). Dropped groups are cleared from the data plane
and the replay buffer at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlctl.config.recipe import DynamicSamplingSection
from rlctl.protocol.kv import KVBatchMeta


class DynamicSamplingExhausted(RuntimeError):
    """``max_draws`` draws did not yield ``prompts_per_step`` groups with a signal."""


def metric_field(metric: str) -> str:
    """The data-plane field of a metric: ``score``, else a reward's ``reward/<metric>``."""
    return "score" if metric == "score" else f"reward/{metric}"


class DynamicSampler:
    """Fills one step with groups whose ``metric`` varies (see the module docstring)."""

    def __init__(
        self,
        settings: DynamicSamplingSection,
        prompts_per_step: int,
        *,
        rollout: Any,
        discard: Callable[[KVBatchMeta], None],
    ) -> None:
        self.settings = settings
        self.prompts_per_step = prompts_per_step
        self.per_draw = settings.prompts_per_draw or prompts_per_step
        self.field = metric_field(settings.metric)
        self.rollout = rollout
        self.discard = discard

    def fill(self, draw: Callable[[int], KVBatchMeta]) -> tuple[KVBatchMeta, dict[str, float]]:
        """``draw(count)`` generates and scores ``count`` prompts' groups; returns the step's
        batch (``prompts_per_step`` groups) and its ``dynamic_sampling/*`` metrics."""
        kept: list[KVBatchMeta] = []
        have = drawn = varied_total = 0
        for draws in range(1, self.settings.max_draws + 1):
            batch = draw(self.per_draw)
            uids = list(dict.fromkeys(batch.tag_values("uid")))  # groups in draw order
            varied = self.varied(batch)
            # first drawn, first kept; groups past a full step are dropped like verl's cut
            take = set([u for u in uids if u in varied][: self.prompts_per_step - have])
            keep = [i for i, u in enumerate(batch.tag_values("uid")) if u in take]
            drop = [i for i, u in enumerate(batch.tag_values("uid")) if u not in take]
            if drop:
                self.discard(batch.select(drop))
            kept.append(batch.select(keep))
            have += len(take)
            drawn += len(uids)
            varied_total += len(varied)
            if have >= self.prompts_per_step:
                return KVBatchMeta.concat(kept), {
                    "dynamic_sampling/groups_drawn": float(drawn),
                    "dynamic_sampling/groups_kept": float(varied_total),
                    "dynamic_sampling/gen_batches": float(draws),
                }
        for batch in kept:
            self.discard(batch)
        s = self.settings
        raise DynamicSamplingExhausted(
            f"dynamic sampling: {s.max_draws} draws of {self.per_draw} prompts gave {have} of "
            f"the {self.prompts_per_step} groups a step needs whose {s.metric!r} varies "
            f"({drawn - varied_total} of {drawn} groups scored alike): the prompts are too "
            "easy or too hard for the policy; raise algorithm.dynamic_sampling.max_draws or "
            "prompts_per_draw, choose another metric, or change the data")

    def varied(self, batch: KVBatchMeta) -> set[str]:
        """Uids of ``batch`` whose metric varies, asked of the rollout workers (by group)."""
        from rlctl.trainer.controller.balance import group_partition

        parts = group_partition(batch.tag_values("uid"), self.rollout.world_size)
        shards = [batch.select(p) for p in parts]  # every group whole on one worker
        answers = self.rollout.call("varied_groups", [{"meta": s} for s in shards],
                                    field=self.field)
        return {uid for part in answers for uid in part}
