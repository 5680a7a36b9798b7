"""LoRA into a real SGLang server on CPU: merged syncs (full weights, the adapters merged in)
give the trainer's log-probs (the PEFT-adapted module) to 1e-4.

SGLang's CPU build cannot load adapters (every LoRA layer pins host memory, which needs CUDA:
docs/sglang.md), so ``lora_sync = "adapter"`` is refused there (tests/config/test_lora.py)
and merged syncs are what runs. Heavy: an SGLang server start costs minutes on 2 shared
cores, and a merged sync is a full-weight update, which test_sglang_engine covers; this module
checks the merged weights of an adapted model end to end.
"""

from __future__ import annotations

import time

import pytest
import torch

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine
from rlctl.engines.rollout.sglang.weight_sync import SGLangWeightSync
from rlctl.models.loading import load_causal_lm
from rlctl.models.lora import AdapterWeights, adapter_state, add_adapters, config_dict, merged_state
from rlctl.testing.rollout_contract import greedy, hf_reference, trainer_log_probs
from rlctl.testing.server_checkpoint import PARITY_PROMPTS, save_server_checkpoint
from tests.engines.rollout.sglang.sglang_env import SGLANG_PYTHON, requires_sglang_env, tiny_recipe

pytestmark = [requires_sglang_env, pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(900)]

LOG_PROB_ATOL = 1e-4  # fp32; SGLang's torch-native path agrees with hf to ~2e-5 (docs/sglang.md)


def test_merged_syncs_give_the_trainers_log_probs(tmp_path) -> None:
    checkpoint = save_server_checkpoint(tmp_path / "tiny")
    data = tiny_recipe(str(checkpoint), python=SGLANG_PYTHON,
                       startup_timeout_s=600).model_dump(by_alias=True)
    data["model"]["lora"] = {"rank": 8, "alpha": 16.0}
    data["engines"]["rollout"]["lora_sync"] = "merged"
    recipe = Recipe.model_validate(data)
    spec = RolloutEngineSpec.from_loaded(validate_recipe(recipe))
    assert spec.lora_adapters is None  # merged: the servers serve full weights
    hf = hf_reference(checkpoint)
    engine = SGLangRolloutEngine(spec)
    started = time.monotonic()
    engine.load()
    print(f"\nsglang server up in {time.monotonic() - started:.1f} s")
    try:
        sync = SGLangWeightSync(spec.weight_sync_options)
        lm = load_causal_lm(recipe.model, seed=0)
        peft = add_adapters(lm, recipe.model.lora, seed=1)
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for _, p in lm.named_parameters():
                if p.requires_grad:
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
        state = lm.state_dict()
        merged = merged_state(state, recipe.model.lora.alpha / recipe.model.lora.rank)
        with engine.weight_update(timeout_s=300):
            sync(merged, engine, 1)
        trained = {n: p.detach() for n, p in lm.named_parameters() if p.requires_grad}
        hf.update_adapter(AdapterWeights(adapter_state(peft, trained), config_dict(peft)), 1)
        gens = greedy(engine)
        assert [g.token_ids for g in gens] == [g.token_ids for g in greedy(hf)]
        sampled = engine.generate_batch(PARITY_PROMPTS, max_new_tokens=8, temperature=0.8)
        worst = 0.0
        for runs, temperature in ((gens, 1.0), (sampled, 0.8)):
            for prompt, g in zip(PARITY_PROMPTS, runs, strict=True):
                assert g.weight_version == 1
                want = trainer_log_probs(hf, prompt, g.token_ids, temperature)
                worst = max(worst, float((torch.tensor(g.log_probs) - want).abs().max()))
        print(f"max |log-prob diff| vs the trainer {worst:.2e}")
        assert worst < LOG_PROB_ATOL
    finally:
        engine.close()
