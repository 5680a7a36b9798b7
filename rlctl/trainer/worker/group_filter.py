"""Which groups of a batch carry a learning signal: the worker side of dynamic sampling.

A group (the samples of one uid) whose ``field`` is the same for every sample has zero
group-relative advantage. Like verl's ``filter_groups``, a group is kept when the population
std of its values is above 0, or when it has a single sample. Only uids travel back to the
controller, never the values.
"""

from __future__ import annotations

from typing import Any

from rlctl.protocol.kv import KVBatchMeta
from rlctl.trainer.worker.sessions import session_groups


def varied_groups(plane: Any, meta: KVBatchMeta, field: str) -> list[str]:
    """The uids of ``meta`` (first-seen order) whose samples differ in the scalar ``field``."""
    from rlctl.dataplane.errors import MissingFieldError

    if len(meta) == 0:
        return []
    try:
        td = plane.kv_batch_get(list(meta.keys), meta.partition_id, [field])
    except MissingFieldError as exc:  # the plane names the field; say which setting asked
        raise ValueError(
            f"algorithm.dynamic_sampling.metric: the samples have no field {field!r} "
            f"({type(exc).__name__}: {exc}); use score, a reward's name, or a component "
            "its reward function returns") from exc
    values = td[field].float().reshape(len(meta), -1)  # [B, 1] for a per-sample scalar
    if values.shape[1] != 1:
        raise ValueError(f"algorithm.dynamic_sampling.metric: field {field!r} is not one number "
                         f"per sample (shape {list(td[field].shape)})")
    by_uid: dict[str, list[float]] = {}
    uids = meta.tag_values("uid")
    # one value per session (its last output): the outputs of a multi-output session share
    # their session's score, and a group's members are its sessions (docs/agents.md)
    for members in session_groups(list(meta.keys)):
        by_uid.setdefault(uids[members[-1]], []).append(float(values[members[-1], 0]))
    return [uid for uid, vals in by_uid.items() if len(vals) == 1 or _std(vals) > 0]


def _std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
