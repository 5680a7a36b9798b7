"""A minimal GRPO loop over the real engines (no trainer): measures what the tiny model learns.

Used by the slow learning test and runnable by hand:
``python tests/engines/train/fsdp/grpo_driver.py --steps 150`` prints per-step reward and timings.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import torch

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.distributed import all_reduce_sum, group_device
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.hf.engine import HFRolloutEngine
from rlctl.engines.rollout.weight_sync import InProcessWeightSync
from rlctl.engines.train.batch import ModelBatch
from rlctl.engines.train.contract import ModelEngineSpec
from rlctl.engines.train.fsdp.engine import FSDPEngine
from rlctl.models.loading import load_tokenizer
from rlctl.registry import get_registry
from rlctl.rewards.base import RewardInput
from rlctl.tasks.prompt import tokenize_prompt


def tiny_recipe(task: str = "count_digits", *, seed: int = 0, lr: float = 3e-3,
                max_new_tokens: int = 3, prompts: int = 64, group: int = 8) -> Recipe:
    return Recipe.model_validate({
        "run": {"seed": seed},
        "model": {"path": "tiny", "dtype": "float32"},
        "data": {"task": task},
        "algorithm": {"prompts_per_step": prompts, "group_size": group,
                      "optim": {"lr": lr, "grad_clip": 1.0}},
        "rollout": {"max_new_tokens": max_new_tokens, "temperature": 1.0},
        "engines": {"train": {"micro_batch_size": 256, "log_prob_micro_batch_size": 512}},
    })


@dataclass
class History:
    reward: list[float] = field(default_factory=list)
    exact: list[float] = field(default_factory=list)
    t_gen: list[float] = field(default_factory=list)
    t_logp: list[float] = field(default_factory=list)
    t_update: list[float] = field(default_factory=list)
    t_step: list[float] = field(default_factory=list)


def run(recipe: Recipe, steps: int, *, verbose: bool = False) -> History:
    registry = get_registry()
    task = registry.get("task", recipe.data.task)
    options = task.options.model_validate(recipe.data.task_options)
    source = iter(task.load()(options, seed=recipe.run.seed))
    reward_fn = registry.load("reward_function", task.metadata["reward"])
    tokenizer = load_tokenizer(recipe.model)
    actor = FSDPEngine(ModelEngineSpec.from_loaded(validate_recipe(recipe), "actor"))
    actor.init()
    rollout = HFRolloutEngine(RolloutEngineSpec.from_loaded(validate_recipe(recipe)))
    rollout.load()
    sync = InProcessWeightSync()
    alg, temp = recipe.algorithm, recipe.rollout.temperature
    clip_low, clip_high = alg.loss.clip_low, alg.loss.clip_high

    def loss_fn(out, f):
        ratio = torch.exp(out["log_probs"] - f["old_log_probs"])  # [b, R]
        adv = f["advantages"][:, None]
        pg = -torch.minimum(ratio * adv, ratio.clamp(1 - clip_low, 1 + clip_high) * adv)
        mask = f["response_mask"]
        return (pg * mask).sum() / f["normaliser"][0], {"pg_loss": (pg * mask).sum() / mask.sum()}

    hist = History()
    for step in range(steps):
        t0 = time.perf_counter()
        prompts = [next(source) for _ in range(alg.prompts_per_step)]
        ids = [tokenize_prompt(p, tokenizer) for p in prompts]
        flat_ids = [i for i in ids for _ in range(alg.group_size)]
        gens = rollout.generate_batch(flat_ids, max_new_tokens=recipe.rollout.max_new_tokens,
                                      temperature=temp, top_p=1.0, top_k=0, seed=step)
        t1 = time.perf_counter()
        scores = []
        for k, g in enumerate(gens):
            p = prompts[k // alg.group_size]
            sample = RewardInput.from_tokens(
                tokenizer, prompt_ids=flat_ids[k], response_ids=g.token_ids,
                ground_truth=p.ground_truth, data_source=p.data_source,
                eos_token_ids=[tokenizer.eos_token_id])
            scores.append(reward_fn(sample))
        reward = torch.tensor([s["score"] for s in scores]).view(-1, alg.group_size)
        adv = (reward - reward.mean(1, keepdim=True)) / (reward.std(1, keepdim=True) + 1e-6)
        batch = ModelBatch.from_samples(
            flat_ids, [g.token_ids for g in gens], tokenizer.pad_token_id
        )
        t2 = time.perf_counter()
        old_lp, _ = actor.compute_log_prob(batch, temperature=temp, with_entropy=False)
        t3 = time.perf_counter()
        fields = {"old_log_probs": old_lp, "advantages": adv.reshape(-1),
                  "response_mask": batch.response_mask,
                  "normaliser": torch.full((batch.batch_size,),
                                           all_reduce_sum(batch.response_mask.sum(),
                                                          group_device()))}
        metrics = actor.train_minibatch(batch, fields, loss_fn, temperature=temp)
        sync(actor, rollout, step + 1)
        t4 = time.perf_counter()
        hist.reward.append(float(reward.mean()))
        hist.exact.append(sum(s["exact"] for s in scores) / len(scores))
        hist.t_gen.append(t1 - t0)
        hist.t_logp.append(t3 - t2)
        hist.t_update.append(t4 - t3)
        hist.t_step.append(t4 - t0)
        if verbose:
            print(f"step {step:4d} reward {hist.reward[-1]:.3f} exact {hist.exact[-1]:.3f} "
                  f"gen {t1-t0:.3f}s logp {t3-t2:.3f}s update {t4-t3:.3f}s "
                  f"grad_norm {metrics['grad_norm']:.3f}", flush=True)
    return hist


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="count_digits")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--max-new-tokens", type=int, default=3)
    a = parser.parse_args()
    t = time.perf_counter()
    h = run(tiny_recipe(a.task, seed=a.seed, lr=a.lr, max_new_tokens=a.max_new_tokens), a.steps,
            verbose=True)
    first3, last10 = sum(h.reward[:3]) / 3, sum(h.reward[-10:]) / 10
    med = lambda xs: sorted(xs)[len(xs) // 2]
    print(f"first-3 {first3:.3f} last-10 {last10:.3f} ratio {last10 / max(first3, 1e-9):.1f} "
          f"wall {time.perf_counter() - t:.1f}s median step {med(h.t_step):.3f}s "
          f"gen {med(h.t_gen):.3f}s logp {med(h.t_logp):.3f}s update {med(h.t_update):.3f}s")
