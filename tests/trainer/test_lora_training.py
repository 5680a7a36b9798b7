"""LoRA runs end to end (``rlctl train --local``, CPU, fixed seed): the KL reference is the
actor's module with its adapters off (no reference engine is built), checkpoints hold only the
adapters and their optimizer state, a run SIGKILLed mid-step and resumed logs exactly the
metrics of an uninterrupted one, and ``rlctl export`` writes the adapter (PEFT's format) or,
with ``--merged``, an HF model: both give the logits of the trained policy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

RECIPE = """
[run]
name = "{name}"
seed = 3
output_dir = "{out}"
device = "cpu"
[model]
path = "tiny"
dtype = "float32"
[model.lora]
rank = 4
alpha = 8.0
[data]
task = "count_digits"
[algorithm]
prompts_per_step = 8
group_size = 4
[algorithm.kl]
in = "loss"
coef = 0.05
[algorithm.optim]
lr = 1e-2
[rollout]
max_new_tokens = 3
[[rewards]]
name = "digits_match"
[engines.train]
ranks = 1
micro_batch_size = 16
[data_plane]
backend = "memory"
[resources]
mode = "local"
[schedule]
total_steps = 6
save_every = 2
keep_last = 3
[logging]
sinks = ["jsonl"]
progress = false
"""

VOLATILE = ("timing_s/", "perf/throughput", "time")
ENV = dict(os.environ, PYTHONHASHSEED="0")


def _write(tmp: Path, name: str) -> Path:
    path = tmp / f"{name}.toml"
    path.write_text(RECIPE.format(name=name, out=tmp / "runs"))
    return path


def _train(recipe: Path, *extra: str) -> None:
    cmd = [sys.executable, "-m", "rlctl", "train", str(recipe), "--quiet", *extra]
    subprocess.run(cmd, env=ENV, timeout=600, check=True)


def _metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in rows]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("lora-run")
    _train(_write(tmp, "ref"))
    return tmp / "runs" / "ref"


@pytest.mark.slow
def test_the_kl_is_taken_to_the_base_model_of_the_actors_module(reference_run) -> None:
    rows = _metrics(reference_run)
    assert [r["step"] for r in rows] == list(range(1, 7))
    # step 1: the adapters start at zero, the actor is the base model: KL 0; then it moves
    assert rows[0]["actor/kl"] == pytest.approx(0.0, abs=1e-7)
    assert rows[-1]["actor/kl"] > 1e-5


@pytest.mark.slow
def test_the_worker_builds_no_reference_engine(tmp_path) -> None:
    import torch.multiprocessing as mp

    out = tmp_path / "engines.json"
    mp.spawn(_engines_of_a_lora_worker, args=(str(out),), nprocs=1, join=True)
    assert json.loads(out.read_text()) == {"roles": ["actor"], "reference": "base",
                                           "engines": ["actor"]}


def _engines_of_a_lora_worker(_rank: int, out: str) -> None:
    """In a process of its own (the worker joins a process group): the engines a LoRA KL
    run's training worker builds."""
    from rlctl.config.pipeline import validate_recipe
    from rlctl.config.recipe import Recipe
    from rlctl.dataplane.memory import MemoryDataPlane
    from rlctl.ports import free_port
    from rlctl.trainer.plan import plan_of
    from rlctl.trainer.worker.training_worker import TrainingWorker
    from tests.engines.gloo_teardown import leave_process_group

    loaded = validate_recipe(Recipe.model_validate({
        "run": {"device": "cpu"}, "data": {"task": "count_digits"},
        "model": {"dtype": "float32", "lora": {"rank": 4}}, "algorithm": {"kl": {"in": "loss"}},
        "data_plane": {"backend": "memory"}, "resources": {"mode": "local"}}))
    plan = plan_of(loaded)
    worker = TrainingWorker(loaded, MemoryDataPlane(), plan, master_port=free_port())
    worker.ready()
    Path(out).write_text(json.dumps({"roles": list(plan.roles),
                                     "reference": plan.reference.value,
                                     "engines": sorted(worker.engines)}))
    worker.close()
    leave_process_group(ok=True)


@pytest.mark.slow
def test_checkpoints_hold_only_the_adapters_and_their_optimizer_state(reference_run) -> None:
    from rlctl.checkpoint import safe_dcp

    state = safe_dcp.load_full(reference_run / "checkpoints" / "step_6" / "train" / "actor")
    assert state["model"] and all(".lora_A." in k or ".lora_B." in k for k in state["model"])
    moments = state["optimizer"]["state"]
    assert set(moments) == set(state["model"])  # AdamW's moments of the adapters, nothing else


@pytest.mark.slow
def test_sigkill_then_resume_matches_an_uninterrupted_run(reference_run, tmp_path) -> None:
    killed = _write(tmp_path, "killed")
    run_dir = tmp_path / "runs" / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "rlctl", "train", str(killed), "--quiet"],
                            env=ENV)
    deadline = time.monotonic() + 600
    # three logged steps: step 2's checkpoint is committed (a step logs, then saves)
    while time.monotonic() < deadline and proc.poll() is None:
        metrics = run_dir / "metrics.jsonl"
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    _train(killed, "--resume")
    assert _metrics(run_dir) == _metrics(reference_run)


@pytest.mark.slow
def test_export_writes_the_adapter_or_the_merged_model(reference_run, tmp_path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from rlctl.config.recipe import Recipe
    from rlctl.models.loading import load_causal_lm

    def export(*extra: str) -> Path:
        out = tmp_path / ("merged" if extra else "adapter")
        subprocess.run([sys.executable, "-m", "rlctl", "export", str(reference_run), "-o",
                        str(out), *extra], check=True, timeout=300, env=ENV)
        return out

    adapter, merged = export(), export("--merged")
    assert {p.name for p in adapter.iterdir()} >= {"adapter_config.json",
                                                   "adapter_model.safetensors"}
    assert (adapter / "adapter_model.safetensors").stat().st_size < 0.2 * (
        merged / "model.safetensors").stat().st_size
    base = load_causal_lm(Recipe.model_validate({"model": {"dtype": "float32"}}).model, seed=3)
    x = torch.tensor([[1, 5, 6, 7, 14]])
    with torch.no_grad():
        by_adapter = PeftModel.from_pretrained(base, str(adapter)).eval()(x).logits
        by_merged = AutoModelForCausalLM.from_pretrained(str(merged)).eval()(x).logits
        untrained = load_causal_lm(Recipe.model_validate({"model": {"dtype": "float32"}}).model,
                                   seed=3)(x).logits
    torch.testing.assert_close(by_merged, by_adapter, rtol=0, atol=1e-5)
    assert (by_adapter - untrained).abs().max() > 1e-3  # the trained policy, not the base
    # the run's own final export is the merged model too
    final = AutoModelForCausalLM.from_pretrained(str(reference_run / "hf")).eval()
    with torch.no_grad():
        torch.testing.assert_close(final(x).logits, by_merged, rtol=0, atol=1e-6)
