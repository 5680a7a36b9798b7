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

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine
from rlctl.engines.rollout.vllm.weight_sync import VLLMWeightSync
from rlctl.testing.rollout_contract import (
    check_adapter_sync,
    greedy,
    hf_reference,
)
from rlctl.testing.server_checkpoint import save_server_checkpoint
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


def test_adapter_syncs_give_the_trainers_log_probs(engine, spec, recipe) -> None:
    hf = hf_reference(recipe.model.path)
    sync = VLLMWeightSync(spec.weight_sync_options)
    before = [g.token_ids for g in greedy(engine)]
    for version in (1, 2):
        worst = check_adapter_sync(engine, sync, recipe, hf, version, before=before,
                                   timeout_s=60)
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
