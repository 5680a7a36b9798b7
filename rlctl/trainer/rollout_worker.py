"""The AgentLoop worker: reads prompts, runs ``n`` sessions each, writes outputs to the data plane.

It never returns tensors to the controller: outputs go straight into the data plane under
``{uid}_{session_id}_{index}`` with tags (``global_step``, ``status``, ``seq_len``, ``uid``),
and the ReplayBuffer tells the controller when a step is complete. A session that raises
becomes a ``failure`` tag carrying the error, so the step reports it instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import os
import traceback
from typing import Any

from rlctl.config.recipe import Recipe
from rlctl.protocol.kv import KVBatchMeta, make_key
from rlctl.trainer.agent_loop import AgentOutput, PromptRecord, SamplingParams


class RolloutWorker:
    """One AgentLoop worker with its rollout engine, reward functions and agent loop."""

    def __init__(self, recipe: Recipe, plane: Any, rank: int = 0, threads: int | None = None) -> None:
        self.recipe = recipe
        self.plane = plane
        self.rank = rank
        self.threads = threads
        self.engine: Any = None

    def ready(self) -> bool:
        import torch

        from rlctl.engines.rollout_engine import RolloutEngineSpec
        from rlctl.models.loading import load_tokenizer
        from rlctl.registry import get_registry
        from rlctl.trainer.device import pick_device
        from rlctl.rewards.reward_set import RewardSet
        from rlctl.trainer.reward_sections import effective_rewards

        if self.threads:
            torch.set_num_threads(self.threads)
        registry = get_registry()
        self.tokenizer = load_tokenizer(self.recipe.model)
        engine_cls = registry.load("rollout_engine", self.recipe.engines.rollout.backend)
        self.engine = engine_cls(
            RolloutEngineSpec(recipe=self.recipe, device=pick_device(self.recipe), seed=self.recipe.run.seed + 1000 * self.rank)
        )
        self.engine.load()
        sync_name = self.recipe.engines.rollout.weight_sync or registry.get(
            "rollout_engine", self.recipe.engines.rollout.backend
        ).metadata.get("weight_sync", "in_process")
        sync_reg = registry.get("weight_sync", sync_name)
        sync_options = sync_reg.options() if sync_reg.options is not None else None
        # The controller moves the exported weights here (object store in Ray mode); the
        # registered weight-sync method applies them to the engine.
        self.weight_sync = sync_reg.load()(sync_options)
        loop_cls = registry.load("agent_loop", self.recipe.rollout.agent_loop)
        self.agent_loop = loop_cls()
        self.rewards = RewardSet.from_sections(effective_rewards(self.recipe, registry), registry)
        eos = self.tokenizer.eos_token_id
        self.eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        return True

    # ------------------------------------------------------------------ rollout
    def generate(
        self,
        prompts: KVBatchMeta,
        partition: str,
        global_step: int,
        sampling: SamplingParams,
        group_size: int,
    ) -> dict[str, float]:
        """Run every session of ``prompts`` and put the outputs into ``partition``.

        Returns only counts: the outputs are in the data plane.
        """
        td = self.plane.kv_batch_get(
            list(prompts.keys), prompts.partition_id, ["prompt_ids", "ground_truth", "data_source"]
        )
        records = []
        prompt_ids = td["prompt_ids"]
        for i, key in enumerate(prompts.keys):
            records.append(
                PromptRecord(
                    uid=key,
                    prompt_ids=[int(t) for t in prompt_ids[i].tolist()],
                    ground_truth=json.loads(_non_tensor(td, "ground_truth", i)),
                    data_source=str(_non_tensor(td, "data_source", i)),
                )
            )
        n_per_prompt = [int(tags.get("n", group_size)) for tags in prompts.tags]
        counts = asyncio.run(self._run_all(records, n_per_prompt, partition, global_step, sampling))
        return counts

    async def _run_all(self, records, n_per_prompt, partition, global_step, sampling) -> dict[str, float]:
        results = await asyncio.gather(
            *(
                self._run_prompt(rec, n, partition, global_step, sampling)
                for rec, n in zip(records, n_per_prompt, strict=True)
            )
        )
        return {"outputs": float(sum(r[0] for r in results)), "failures": float(sum(r[1] for r in results))}

    async def _run_prompt(self, rec: PromptRecord, n: int, partition: str, global_step: int, sampling: SamplingParams) -> tuple[int, int]:
        sessions = await asyncio.gather(
            *(self.agent_loop.run(rec, s, sampling, self._generate) for s in range(n)),
            return_exceptions=True,
        )
        outputs: list[tuple[str, AgentOutput]] = []
        failures: list[tuple[str, str]] = []
        for session_id, result in enumerate(sessions):
            if isinstance(result, BaseException):
                err = "".join(traceback.format_exception_only(type(result), result)).strip()
                failures.append((make_key(rec.uid, session_id, 0), err))
                continue
            for index, out in enumerate(result):
                outputs.append((make_key(rec.uid, session_id, index), out))
        if outputs:
            await self._put_outputs(rec, outputs, partition, global_step)
        if failures:
            tags = [
                {"uid": rec.uid, "global_step": global_step, "status": "failure", "error": err, "seq_len": 0}
                for _, err in failures
            ]
            await self.plane.async_kv_batch_put([k for k, _ in failures], partition, None, tags)
        return len(outputs), len(failures)

    async def _put_outputs(self, rec: PromptRecord, outputs: list[tuple[str, AgentOutput]], partition: str, global_step: int) -> None:
        import torch
        from tensordict import TensorDict

        from rlctl.rewards.base import RewardInput

        scores, components = [], []
        for _, out in outputs:
            sample = RewardInput.from_tokens(
                self.tokenizer,
                prompt_ids=out.prompt_ids,
                response_ids=out.response_ids,
                ground_truth=rec.ground_truth,
                data_source=rec.data_source,
                eos_token_ids=self.eos_ids,
                extra=out.extra,
            )
            result = self.rewards(sample)  # {"score", "<name>", "<name>/<component>"}
            scores.append(float(result["score"]))
            components.append({f"reward/{k}": float(v) for k, v in result.items() if k != "score"})
        b = len(outputs)
        fields: dict[str, Any] = {
            # jagged [B, (P_i)] / [B, (R_i)]: stored without padding
            "prompt_ids": torch.nested.as_nested_tensor(
                [torch.tensor(o.prompt_ids, dtype=torch.long) for _, o in outputs], layout=torch.jagged
            ),
            "response_ids": torch.nested.as_nested_tensor(
                [torch.tensor(o.response_ids or [self.tokenizer.pad_token_id], dtype=torch.long) for _, o in outputs],
                layout=torch.jagged,
            ),
            "rollout_log_probs": torch.nested.as_nested_tensor(
                [torch.tensor(o.rollout_log_probs or [0.0], dtype=torch.float32) for _, o in outputs],
                layout=torch.jagged,
            ),
            "score": torch.tensor(scores, dtype=torch.float32),  # [B]
        }
        for name in sorted({k for c in components for k in c}):
            fields[name] = torch.tensor([c.get(name, 0.0) for c in components], dtype=torch.float32)
        td = TensorDict(fields, batch_size=[b])
        tags = [
            {
                "uid": rec.uid,
                "global_step": global_step,
                "status": "success",
                "prompt_len": len(o.prompt_ids),
                "response_len": len(o.response_ids),
                "seq_len": len(o.prompt_ids) + len(o.response_ids),
                "weight_version": o.weight_version,
                "finish_reason": o.finish_reason,
            }
            for _, o in outputs
        ]
        await self.plane.async_kv_batch_put([k for k, _ in outputs], partition, td, tags)

    async def _generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Any:
        return await self.engine.generate(prompt_ids, sampling)

    # ------------------------------------------------------------------ inspection
    def dump_samples(self, meta: KVBatchMeta, path: str) -> int:
        """Write decoded samples of ``meta`` (prompt, response, reward, advantage) as JSON lines."""
        from pathlib import Path

        td = self.plane.kv_batch_get(list(meta.keys), meta.partition_id,
                                     ["prompt_ids", "response_ids", "score", "advantages"])
        rows = []
        for i, (key, tags) in enumerate(zip(meta.keys, meta.tags, strict=True)):
            adv = td["advantages"][i]
            rows.append({
                "key": key,
                "step": tags.get("global_step"),
                "prompt": self.tokenizer.decode(td["prompt_ids"][i].tolist(), skip_special_tokens=False),
                "response": self.tokenizer.decode(td["response_ids"][i].tolist(), skip_special_tokens=False),
                "reward": float(td["score"][i]),
                "advantage": float(adv.float().mean()) if adv.numel() else 0.0,
                "response_len": tags.get("response_len"),
            })
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return len(rows)

    # ------------------------------------------------------------------ weights
    def update_weights(self, weights: Any, version: int) -> int:
        """Load new policy weights (a state dict, or ``[ObjectRef]`` in Ray mode)."""
        if isinstance(weights, list):  # a Ray object ref wrapped so Ray does not resolve it early
            import ray

            weights = ray.get(weights[0])
        self.weight_sync(weights, self.engine, version)
        return self.engine.weight_version

    def state_dict(self) -> dict[str, Any]:
        """Sampler state: restoring it makes a resumed run draw the same samples."""
        return self.engine.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.engine.load_state_dict(state)

    def weight_version(self) -> int:
        return self.engine.weight_version

    def close(self) -> None:
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()

    def pid(self) -> int:
        return os.getpid()


def _non_tensor(td: Any, key: str, i: int) -> Any:
    value = td.get(key)
    if hasattr(value, "tolist") and not hasattr(value, "dtype"):
        return value.tolist()[i]
    if isinstance(value, (list, tuple)):
        return value[i]
    data = getattr(value, "data", None)
    if isinstance(data, (list, tuple)):
        return data[i]
    return td[i][key] if not isinstance(td[i][key], str) else td[i][key]
