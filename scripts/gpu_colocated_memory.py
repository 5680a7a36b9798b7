"""Colocated memory on a GPU (run by scripts/gpu_check.sh): one rollout server of the
gpu_check recipe started able to release its memory; prints the device memory it frees and
takes back, and checks the weight sync across sleep and wake (the weights synced after the
wake are the ones it generates with: a sync lost to the wake-up would leave the old tokens).

Usage: python scripts/gpu_colocated_memory.py BACKEND PYTHON [OVERRIDE...]
  BACKEND: vllm or sglang; PYTHON: the engine env's interpreter; OVERRIDE: -s values.
"""

from __future__ import annotations

import sys
import time


def main(backend: str, python: str, overrides: list[str]) -> int:
    import torch

    from rlctl.config.pipeline import load_recipe
    from rlctl.engines.rollout.contract import RolloutEngineSpec
    from rlctl.models.loading import load_causal_lm
    from rlctl.registry import get_registry
    from rlctl.trainer.worker.rollout_worker import make_weight_sync

    loaded = load_recipe(["recipes/tiny_grpo.toml", "scripts/gpu_check.toml"],
                         [f"engines.rollout.backend={backend}",
                          f"engines.rollout.options.python={python}", *overrides])
    registry = get_registry()
    spec = RolloutEngineSpec.from_loaded(loaded, device="cuda", release_memory=True)
    engine = registry.load("rollout_engine", backend)(spec)
    print(f"[{backend}] release: {engine.memory_release()}")
    engine.load()
    sync = make_weight_sync(loaded, registry)
    prompts = [[1, 2, 3, 4, 5, 6, 7, 8]] * 4

    def greedy() -> list[list[int]]:
        return [g.token_ids for g in engine.generate_batch(prompts, max_new_tokens=8,
                                                           temperature=0.0, seed=0)]

    def free_gib() -> float:
        torch.cuda.synchronize()
        return torch.cuda.mem_get_info()[0] / 2**30

    try:
        before = greedy()
        awake = free_gib()
        started = time.perf_counter()
        engine.release_memory(timeout_s=120)
        release_s = time.perf_counter() - started
        asleep = free_gib()
        weights = load_causal_lm(loaded.recipe.model, loaded.recipe.run.seed).state_dict()
        changed = {k: (-v if k.endswith("lm_head.weight") or "embed_tokens" in k else v)
                   for k, v in weights.items()}
        started = time.perf_counter()
        with engine.weight_update(timeout_s=120):
            engine.resume_memory(("weights",), timeout_s=120)
            woke_weights = free_gib()
            sync(changed, engine, 1)
            engine.resume_memory(("kv_cache",), timeout_s=120)
        wake_sync_s = time.perf_counter() - started
        after = greedy()
        print(f"[{backend}] device free GiB: awake {awake:.2f}, released {asleep:.2f} "
              f"(freed {asleep - awake:.2f}), weights back {woke_weights:.2f}, all back "
              f"{free_gib():.2f}; release {release_s:.2f} s, wake + sync {wake_sync_s:.2f} s")
        ok = asleep - awake > 0.1 and after != before and engine.weight_version == 1
        print(f"[{backend}] sleep/wake: {'OK' if ok else 'FAILED'} (memory freed, generation "
              f"after the sync {'changed' if after != before else 'UNCHANGED: sync lost'})")
        return 0 if ok else 1
    finally:
        sync.close()
        engine.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
