"""How the outputs of agent sessions get their token rewards and advantages.

* Scores: the rollout worker scores a session's last output with the reward functions and
  copies that score onto the session's earlier outputs (the episode's outcome). Here each
  output's score sits on its last *generated* token; per-step environment rewards
  (``token_rewards``) sit on each step's last generated token.
* Advantages, group-based estimators (GRPO, RLOO...): the group is the prompt (uid) and its
  members are *sessions*, not outputs - the estimator runs on one row per session (its last
  output), so a session that emitted three outputs does not weigh three times in the group
  mean and std. Each output of the session then gets the session's advantage on its own
  generated tokens. An estimator whose advantages vary along a row (token-level) is run on
  every output instead, each output its own sample.
* Other estimators (GAE, REINFORCE++...) run on every output, each output its own sequence.

With one output per session (single_turn and most tool / env runs) all of this reduces to the
plain per-sample computation, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rlctl.protocol.kv import KeyFormatError, KVBatchMeta, parse_key
from rlctl.trainer import metric_reduce as mr
from rlctl.trainer.worker.fields import to_padded


def place_scores(plane: Any, meta: KVBatchMeta, scores: Any, mask: Any, lengths: list[int]) -> Any:
    """Token-level scores [B, R]: each sample's score on its last generated token.

    Outputs tagged ``token_rewards`` (an environment's per-step rewards) bring their own
    per-token rewards; the part of the score they do not account for (other reward
    functions) still sits on the last generated token, so every row sums to its score.
    """
    import torch

    # Last generated token: the last 1 of the mask (the last token for single-turn outputs).
    width = mask.shape[1]
    positions = torch.arange(width).expand_as(mask)
    last = torch.where(mask.bool(), positions, torch.full_like(positions, -1)).amax(dim=1)
    last = torch.where(
        last >= 0, last, (torch.as_tensor(lengths).clamp(min=1) - 1).clamp(max=width - 1)
    )
    token_scores = torch.zeros_like(mask)
    rows_with = [i for i, t in enumerate(meta.tags) if t.get("token_rewards")]
    if rows_with:
        td = plane.kv_batch_get(
            [meta.keys[i] for i in rows_with], meta.partition_id, ["token_rewards"]
        )
        per_token = to_padded(td["token_rewards"], [lengths[i] for i in rows_with])
        for j, i in enumerate(rows_with):
            row = per_token[j, : lengths[i]] * mask[i, : lengths[i]]
            token_scores[i, : lengths[i]] = row
            scores = scores.clone()
            scores[i] = scores[i] - row.sum()
    token_scores[torch.arange(len(lengths)), last] += scores
    return token_scores


NOTE_CHARS = 600  # one note's length in a sample's tags (a message, a file:line)
STEP_NOTES = 3  # distinct notes a step shows the user; the rest are counted


def step_notes(meta: KVBatchMeta, limit: int = STEP_NOTES) -> list[str]:
    """What the step's episodes reported for the user (the ``notes`` tag, e.g. tools that
    raised), shown once per step: the first ``limit`` distinct ones, then how many more."""
    seen = list(dict.fromkeys(n for t in meta.tags for n in t.get("notes") or ()))
    if len(seen) <= limit:
        return seen
    return seen[:limit] + [f"... and {len(seen) - limit} other distinct problem(s) this step"]


def is_reward_component(name: str) -> bool:
    """``reward/<reward>/<component>``: an extra entry of a reward's dict result."""
    return name.startswith("reward/") and name.count("/") >= 2


def component_partials(meta: KVBatchMeta) -> dict[str, mr.Partial]:
    """Means of the reward components rollout workers tag their outputs with
    (``reward/<reward>/<component>``; only the reward's own name is known ahead, its
    components are whatever its results hold)."""
    names = sorted({k for t in meta.tags for k in t if is_reward_component(k)})
    return {name: mr.partial_of([float(t[name]) for t in meta.tags if name in t]) for name in names}


def agent_partials(meta: KVBatchMeta) -> dict[str, mr.Partial]:
    """Means of the ``agent/<name>`` numbers multi-turn loops tag their outputs with."""
    names = sorted({k for t in meta.tags for k in t if k.startswith("agent/")})
    return {name: mr.partial_of([float(t[name]) for t in meta.tags if name in t]) for name in names}


def session_groups(keys: Sequence[str]) -> list[list[int]]:
    """Row indices of each session (``uid``, ``session_id``), outputs in ``index`` order."""
    by_session: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for row, key in enumerate(keys):
        try:
            uid, session, index = parse_key(key)
        except KeyFormatError:
            uid, session, index = key, row, 0
        by_session.setdefault((uid, session), []).append((index, row))
    return [[row for _, row in sorted(items)] for items in by_session.values()]


def estimate_by_session(
    estimator: Callable[..., Any],
    keys: Sequence[str],
    group_based: bool,
    *,
    rows: dict[str, Any],
    index: Sequence[Any],
    reward_components: dict[str, Any],
    constants: dict[str, Any],
) -> tuple[Any, Any]:
    """``(advantages, returns)`` [B, R], sessions counted once by group estimators.

    ``rows`` holds the per-row tensors [B, R] (``token_level_rewards``, ``response_mask``,
    estimator inputs); ``reward_components`` per-row [B] tensors.
    """
    import torch

    def run(sel: list[int] | None) -> tuple[Any, Any]:
        pick = (lambda t: t) if sel is None else (lambda t: t[sel])
        return estimator(
            **{k: pick(v) for k, v in rows.items()},
            index=list(index) if sel is None else [index[i] for i in sel],
            reward_components={k: pick(v) for k, v in reward_components.items()},
            **constants,
        )

    groups = session_groups(keys)
    if not group_based or all(len(g) == 1 for g in groups):
        return run(None)
    reps = [g[-1] for g in groups]  # the output the reward functions scored
    adv_r, ret_r = run(reps)
    mask = rows["response_mask"]
    rep_mask = mask[reps].bool()
    # per-session scalar: the advantage on the session's generated tokens must be constant
    first = torch.where(rep_mask, adv_r, torch.zeros_like(adv_r)).sum(1) / rep_mask.sum(1).clamp(
        min=1
    )
    if not torch.allclose(
        torch.where(rep_mask, adv_r, first[:, None]), first[:, None].expand_as(adv_r)
    ):
        return run(None)  # token-level advantages: every output its own sample
    ret_first = torch.where(rep_mask, ret_r, torch.zeros_like(ret_r)).sum(1) / rep_mask.sum(
        1
    ).clamp(min=1)
    advantages = torch.zeros_like(mask, dtype=adv_r.dtype)
    returns = torch.zeros_like(mask, dtype=ret_r.dtype)
    for s, members in enumerate(groups):
        for row in members:
            advantages[row] = first[s] * mask[row]
            returns[row] = ret_first[s] * mask[row]
    return advantages, returns
