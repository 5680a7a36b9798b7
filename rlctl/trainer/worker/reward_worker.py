"""The reward worker: scores a step's samples with the recipe's model rewards (reward models).

Its own worker group (``[engines.reward] workers``; in ``--local`` an object in the
controller's process), started only when a ``[[rewards]]`` entry is a ``model`` reward.
``score`` reads the samples' tokens from the data plane (the ground truth from the prompt
partition), scores them in batches, and writes each reward's raw score (``reward/<name>``,
``reward/<name>/<part>``) back, adding the weighted sum to the ``score`` the rollout workers
wrote (their rule rewards and judges). Only the components' scalar partials go back to the
controller.
"""

from __future__ import annotations

import json
from typing import Any

from rlctl.config.loaded import LoadedRecipe
from rlctl.config.placement import Placed
from rlctl.protocol.kv import KVBatchMeta
from rlctl.trainer import metric_reduce as mr
from rlctl.trainer.worker.contract import Worker
from rlctl.trainer.worker.fields import non_tensor_column, rows
from rlctl.trainer.worker.sessions import is_reward_component, session_groups


class RewardWorker(Worker):
    """One reward-model worker: every model reward of the recipe, loaded once."""

    def __init__(
        self, loaded: LoadedRecipe, plane: Any, rank: int = 0, placed: Placed | None = None
    ) -> None:
        self.loaded = loaded
        self.recipe = loaded.recipe
        self.plane = plane
        self.rank = rank
        self.placed = placed

    def ready(self, master_port: int | None = None) -> bool:

        from rlctl.models.loading import load_tokenizer
        from rlctl.registry import get_registry
        from rlctl.rewards.reward_set import RewardSet
        from rlctl.trainer.worker.device import pick_device
        from rlctl.trainer.worker.reward_sections import effective_rewards

        self.take_seat()
        registry = get_registry()
        self.tokenizer = load_tokenizer(self.recipe.model)
        eos = self.tokenizer.eos_token_id
        self.eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        sections = effective_rewards(self.recipe, registry)
        options = [self.loaded.options_for(f"rewards[{i}].options")
                   for i in range(len(sections))]
        self.models = RewardSet.from_sections(sections, registry, options, kind="model",
                                              device=pick_device(self.recipe))
        return True

    def score(self, meta: KVBatchMeta, prompt_partition: str) -> dict[str, mr.Partial]:
        """Score ``meta``'s samples; their prompts (ground truth) are in ``prompt_partition``
        under their uids. Returns the partials of the scorers' extra components
        (``reward/<name>/<part>``)."""
        import torch
        from tensordict import TensorDict

        from rlctl.rewards.base import RewardInput

        if len(meta) == 0:
            return {}
        keys = list(meta.keys)
        td = self.plane.kv_batch_get(keys, meta.partition_id,
                                     ["prompt_ids", "response_ids", "score"])
        uids = list(dict.fromkeys(meta.tag_values("uid")))
        truth = self.plane.kv_batch_get(uids, prompt_partition,
                                        ["ground_truth", "data_source"])
        facts = dict(zip(uids, zip(non_tensor_column(truth, "ground_truth"),
                                   non_tensor_column(truth, "data_source"), strict=True),
                         strict=True))
        # A session's last output is scored (its whole token sequence, observations of a
        # multi-turn output included) and its earlier outputs get the same result, as the
        # rollout workers do for the rule rewards (docs/agents.md).
        sessions = session_groups(keys)  # row indices per session, outputs in index order
        uid_of, prompt_rows, response_rows = meta.tag_values("uid"), rows(td["prompt_ids"]), \
            rows(td["response_ids"])
        # an episode scored 0 by its agent loop (tag episode_error) is not scored again
        failed = [bool(t.get("episode_error")) for t in meta.tags]
        sessions = [members for members in sessions if not failed[members[-1]]]
        samples = []
        for last in (members[-1] for members in sessions):
            ground_truth, source = facts[uid_of[last]]
            samples.append(RewardInput.from_tokens(
                self.tokenizer, prompt_ids=prompt_rows[last].tolist(),
                response_ids=response_rows[last].tolist(),
                ground_truth=json.loads(ground_truth), data_source=str(source),
                eos_token_ids=self.eos_ids))
        # one {"score", "<name>", ...} per session
        scored = self.models.score_batch(samples) if samples else []
        results: list[dict[str, float]] = [{"score": 0.0}] * len(keys)
        for members, result in zip(sessions, scored, strict=True):
            for row in members:
                results[row] = result
        fields: dict[str, Any] = {
            # [B]: the rollout workers' score plus the weighted model rewards
            "score": td["score"].float().reshape(-1)
            + torch.tensor([r["score"] for r in results], dtype=torch.float32),
        }
        for name in sorted({k for r in results for k in r if k != "score"}):
            fields[f"reward/{name}"] = torch.tensor([r.get(name, 0.0) for r in results],
                                                    dtype=torch.float32)  # [B]
        self.plane.kv_batch_put(keys, meta.partition_id, TensorDict(fields, batch_size=[len(keys)]))
        # The components a scorer returned are known only now: the controller logs their
        # means (the rewards' own reward/<name> fields are read with the step's samples).
        return {name: mr.partial_of(values.tolist()) for name, values in fields.items()
                if is_reward_component(name)}
