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
(:mod:`rlctl.trainer.worker.group_filter`). The rollout producer draws, and clears dropped
groups from the data plane and the replay buffer at once; with a streaming staleness policy
later steps are dispatched with ``prompts_per_draw`` prompts too and refilled the same way.
"""

from __future__ import annotations

from typing import Any

from rlctl.config.recipe import DynamicSamplingSection
from rlctl.protocol.kv import KVBatchMeta
from rlctl.trainer.worker.rollout_worker import RolloutWorker


class DynamicSamplingExhausted(RuntimeError):
    """``max_draws`` draws did not yield ``prompts_per_step`` groups with a signal."""


def metric_field(metric: str) -> str:
    """The data-plane field of a metric: ``score``, else a reward's ``reward/<metric>``."""
    return "score" if metric == "score" else f"reward/{metric}"


class DynamicSampler:
    """Which groups of a draw carry a signal (see the module docstring); the rollout producer
    (:mod:`rlctl.trainer.controller.producer`) draws again while too few do."""

    def __init__(self, settings: DynamicSamplingSection, prompts_per_step: int, *,
                 rollout: Any) -> None:
        self.settings = settings
        self.prompts_per_step = prompts_per_step
        self.per_draw = settings.prompts_per_draw or prompts_per_step
        self.max_draws = settings.max_draws
        self.field = metric_field(settings.metric)
        self.rollout = rollout

    def split(self, batch: KVBatchMeta, need: int) -> tuple[KVBatchMeta, KVBatchMeta, int]:
        """``(kept, dropped, groups with a signal)`` of one draw: the first ``need`` groups
        whose metric varies, in draw order, are kept; groups past a full step are dropped
        like verl's cut, and so are the groups without a signal."""
        uids = list(dict.fromkeys(batch.tag_values("uid")))  # groups in draw order
        varied = self.varied(batch)
        take = set([u for u in uids if u in varied][:max(need, 0)])
        keep = batch.select(lambda _k, tags: tags["uid"] in take)
        drop = batch.select(lambda _k, tags: tags["uid"] not in take)
        return keep, drop, len(varied)

    def exhausted(self, have: int, drawn: int, varied: int) -> DynamicSamplingExhausted:
        """The error of a step that ``max_draws`` draws could not fill."""
        s = self.settings
        return DynamicSamplingExhausted(
            f"dynamic sampling: {s.max_draws} draws of {self.per_draw} prompts gave {have} of "
            f"the {self.prompts_per_step} groups a step needs whose {s.metric!r} varies "
            f"({drawn - varied} of {drawn} groups scored alike): the prompts are too "
            "easy or too hard for the policy; raise algorithm.dynamic_sampling.max_draws or "
            "prompts_per_draw, choose another metric, or change the data")

    def varied(self, batch: KVBatchMeta) -> set[str]:
        """Uids of ``batch`` whose metric varies, asked of the rollout workers (by group)."""
        from rlctl.trainer.controller.balance import group_partition

        if len(batch) == 0:
            return set()
        parts = group_partition(batch.tag_values("uid"), self.rollout.world_size)
        shards = [batch.select(p) for p in parts]  # every group whole on one worker
        answers = self.rollout.call(RolloutWorker.varied_groups, [{"meta": s} for s in shards],
                                    field=self.field)
        return {uid for part in answers for uid in part}
