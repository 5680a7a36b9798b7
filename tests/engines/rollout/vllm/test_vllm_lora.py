"""LoRA adapters into a real vLLM server (CPU, eager): the adapter-only sync loads each version
through ``/v1/load_lora_adapter`` under a new name, requests ask for it, the previous one is
unloaded, and the server's log-probs equal the trainer's (the PEFT-adapted module) to 1e-4.

Skipped unless vLLM's own environment is built (``rlctl engines install vllm``). One server
for the module (started with ``--enable-lora``). vLLM and transformers agree to a few 1e-6 in
fp32 (docs/engines.md); with adapters the measured max |diff| is a few 1e-6 too
(docs/lora.md), and the test asserts 1e-4 like the full-weight parity tests.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine
from rlctl.engines.rollout.vllm.weight_sync import VLLMWeightSync
from rlctl.testing.rollout_contract import (
    greedy,
    hf_reference,
    trained_adapter,
    trainer_log_probs,
)
from rlctl.testing.server_checkpoint import PARITY_PROMPTS, save_server_checkpoint
from tests.engines.rollout.vllm.vllm_env import VLLM_PYTHON, requires_vllm_env, tiny_recipe

pytestmark = [requires_vllm_env, pytest.mark.slow, pytest.mark.timeout(400)]

LOG_PROB_ATOL = 1e-4
LORA = {"rank": 8, "alpha": 16.0}


def lora_recipe(checkpoint: Path) -> Recipe:
    data = tiny_recipe(str(checkpoint), python=VLLM_PYTHON,
                       startup_timeout_s=240).model_dump(by_alias=True)
    data["model"]["lora"] = LORA
    return Recipe.model_validate(data)


@pytest.fixture(scope="module")
def recipe(tmp_path_factory) -> Recipe:
    return lora_recipe(save_server_checkpoint(tmp_path_factory.mktemp("tiny-vllm-lora")))


@pytest.fixture(scope="module")
def spec(recipe) -> RolloutEngineSpec:
    spec = RolloutEngineSpec.from_loaded(validate_recipe(recipe))
    assert spec.lora_adapters is not None  # lora_sync = "adapter", the default
    return spec


@pytest.fixture(scope="module")
def engine(spec):  # type: ignore[no-untyped-def]
    e = VLLMRolloutEngine(spec)
    started = time.monotonic()
    e.load()
    print(f"\nvllm server with LoRA up in {time.monotonic() - started:.1f} s")
    yield e
    e.close()


def _served(engine: VLLMRolloutEngine) -> set[str]:
    (replica,) = engine.replicas
    data = engine.run(engine.get(replica, "/v1/models"))
    return {m["id"] for m in data["data"]}


def test_adapter_syncs_give_the_trainers_log_probs(engine, spec, recipe) -> None:
    hf = hf_reference(recipe.model.path)
    sync = VLLMWeightSync(spec.weight_sync_options)
    before = [g.token_ids for g in greedy(engine)]
    for version in (1, 2):
        adapter = trained_adapter(recipe, seed=version)
        with engine.weight_update(timeout_s=60):
            sync(adapter, engine, version)
        hf.update_adapter(adapter, version)  # hf.model is now the trainer's adapted module
        assert engine.adapter == f"rlctl-lora-v{version}"
        assert {"rlctl-lora-v1", "rlctl-lora-v2"} & _served(engine) == {engine.adapter}
        staged = sorted(p.name for p in (engine.workdir / "weights").iterdir())
        assert staged == [f"adapter-v{version}"]  # the previous version's files are gone
        gens = greedy(engine)
        assert [g.token_ids for g in gens] == [g.token_ids for g in greedy(hf)]
        if version == 1:
            assert [g.token_ids for g in gens] != before  # the adapter changed the policy
        sampled = engine.generate_batch(PARITY_PROMPTS, max_new_tokens=8, temperature=0.8,
                                        seed=version)
        worst = 0.0
        for runs, temperature in ((gens, 1.0), (sampled, 0.8)):  # greedy is scored at T = 1
            for prompt, g in zip(PARITY_PROMPTS, runs, strict=True):
                assert g.weight_version == version
                want = trainer_log_probs(hf, prompt, g.token_ids, temperature)
                worst = max(worst, float((torch.tensor(g.log_probs) - want).abs().max()))
        print(f"version {version}: max |log-prob diff| vs the trainer {worst:.2e}")
        assert worst < LOG_PROB_ATOL


@pytest.mark.heavy  # a full run with a server; the sync itself is tested above
def test_a_lora_run_trains_with_vllm_loading_each_adapter(tmp_path) -> None:
    import json
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[4]
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "rlctl", "train", str(repo / "recipes" / "tiny_grpo.toml"),
           "--quiet", "--local", "-s", "engines.rollout.backend=vllm",
           "-s", "model.tiny.head_dim=32", "-s", f'engines.rollout.options.python="{VLLM_PYTHON}"',
           "-s", f'run.output_dir="{out}"', "-s", "schedule.total_steps=3",
           "-s", "model.lora.rank=4", "-s", "model.lora.alpha=8.0",
           "-s", 'algorithm.kl.in="loss"']
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(x) for x in (out / "tiny-grpo" / "metrics.jsonl").read_text().splitlines()]
    assert [r["training/policy_version"] for r in rows] == [1.0, 2.0, 3.0]
    # the server's probabilities of the sampled tokens are the trainer's (measured ~3e-9)
    assert all(r["training/rollout_probs_diff"] < 1e-6 for r in rows)
    assert rows[0]["actor/kl"] == 0.0 and rows[-1]["actor/kl"] > 0.0
