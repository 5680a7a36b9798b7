"""LoRA into a real SGLang server on CPU: merged syncs (full weights, the adapters merged in)
and adapter-only syncs (only the adapter's tensors move, loaded under a versioned name) give
the trainer's log-probs (the PEFT-adapted module) to 1e-4.

SGLang 0.5.23's CPU build cannot load adapters: every LoRA layer pins host memory, which needs
a CUDA driver (docs/sglang.md). So the product refuses ``lora_sync = "adapter"`` with SGLang on
CPU (tests/config/test_lora.py), and merged syncs are what runs there. Pinning is the only
blocker: SGLang's ``torch_native`` LoRA backend is plain torch. The adapter test starts the
server under a TEST-ONLY shim (``shim/sitecustomize.py``: ``sglang.srt.lora`` does not
pin on CPU) and an engine whose one override says its servers load adapters, then runs rlctl's
real adapter path: the sync's ``/load_lora_adapter`` and ``/unload_lora_adapter`` calls,
``rlctl-lora-v<N>`` names, requests naming the adapter.

Heavy: an SGLang server start costs minutes on 2 shared cores (one per test); a merged sync is
a full-weight update, which test_sglang_engine covers.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine
from rlctl.engines.rollout.sglang.weight_sync import SGLangWeightSync
from rlctl.models.loading import load_causal_lm
from rlctl.models.lora import AdapterWeights, adapter_state, add_adapters, config_dict, merged_state
from rlctl.testing.rollout_contract import (
    check_adapter_sync,
    greedy,
    hf_reference,
    max_log_prob_diff,
)
from rlctl.testing.server_checkpoint import PARITY_PROMPTS, save_server_checkpoint
from tests.engines.rollout.sglang.sglang_env import SGLANG_PYTHON, requires_sglang_env, tiny_recipe

pytestmark = [requires_sglang_env, pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(1200)]

LOG_PROB_ATOL = 1e-4  # fp32; SGLang's torch-native path agrees with hf to ~2e-5 (docs/sglang.md)
LORA = {"rank": 8, "alpha": 16.0}
LORA_SHIM = Path(__file__).parent / "shim"  # test-only: see its sitecustomize.py


class ShimmedSGLangRolloutEngine(SGLangRolloutEngine):
    """TEST-ONLY: the sglang engine, told that its CPU servers load adapters, which holds
    because they start under ``shim/sitecustomize.py`` (on their PYTHONPATH, from the recipe)."""

    def servers_load_adapters(self) -> bool:
        return True


def test_merged_syncs_give_the_trainers_log_probs(tmp_path) -> None:
    checkpoint = save_server_checkpoint(tmp_path / "tiny")
    data = tiny_recipe(str(checkpoint), python=SGLANG_PYTHON,
                       startup_timeout_s=600).model_dump(by_alias=True)
    data["model"]["lora"] = LORA
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
        worst = max_log_prob_diff(hf, gens, sampled, 1)
        print(f"max |log-prob diff| vs the trainer {worst:.2e}")
        assert worst < LOG_PROB_ATOL
    finally:
        engine.close()


def test_adapter_syncs_give_the_trainers_log_probs_under_the_test_shim(tmp_path) -> None:
    checkpoint = save_server_checkpoint(tmp_path / "tiny")
    data = tiny_recipe(str(checkpoint), python=SGLANG_PYTHON, startup_timeout_s=600,
                       env={"PYTHONPATH": str(LORA_SHIM)},
                       allow_loader_env=True).model_dump(by_alias=True)  # the shim: code
    data["model"]["lora"] = LORA  # lora_sync = "adapter", the default
    # run.device = "auto": the recipe check refuses adapters with SGLang only on "cpu"; what
    # refuses here is the engine at start (asserted below), which the test engine overrides.
    data["run"]["device"] = "auto"
    recipe = Recipe.model_validate(data)
    spec = RolloutEngineSpec.from_loaded(validate_recipe(recipe), device="cpu")
    assert spec.lora_adapters is not None
    with pytest.raises(ValueError, match="cannot load LoRA adapters"):
        SGLangRolloutEngine(spec)  # the product, without the shim: refused, with the reason
    hf = hf_reference(checkpoint)
    engine = ShimmedSGLangRolloutEngine(spec)
    started = time.monotonic()
    engine.load()
    print(f"\nsglang server with LoRA (test shim) up in {time.monotonic() - started:.1f} s")
    try:
        sync = SGLangWeightSync(spec.weight_sync_options)
        before = [g.token_ids for g in greedy(engine)]
        for version in (1, 2):
            worst = check_adapter_sync(engine, sync, recipe, hf, version, before=before,
                                       timeout_s=300)
            print(f"version {version}: max |log-prob diff| vs the trainer {worst:.2e}")
            assert worst < LOG_PROB_ATOL
    finally:
        engine.close()
