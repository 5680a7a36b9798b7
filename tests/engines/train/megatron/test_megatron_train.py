"""`rlctl train -s engines.train.backend=megatron` on CPU through the test shim (PYTHONPATH
hook in ``shim/sitecustomize.py``): --local (1 rank) and Ray with 2 ranks at TP=2 give the
same numbers, and weight sync reaches the rollout engine (its log-probs are the trainer's).
Without the shim a CPU init fails with an error that says how to run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("megatron.core", reason="megatron-core is not installed: "
                    "pip install megatron-core==0.16.1 (see docs/megatron.md)")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
STEPS = 3


def _train(tmp_path: Path, name: str, *extra: str) -> list[dict]:
    out = tmp_path / name
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE / "shim"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="disabled")
    cmd = [sys.executable, "-m", "rlctl", "train", str(REPO / "recipes" / "tiny_grpo.toml"),
           "--quiet", "-s", "engines.train.backend=megatron",
           "-s", f"schedule.total_steps={STEPS}", "-s", f'run.output_dir="{out}"', *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env,
                          cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (run_dir,) = out.iterdir()
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_train_local_and_ray_tp2_agree(tmp_path):
    local = _train(tmp_path, "local", "--local")
    ray_tp2 = _train(tmp_path, "ray", "-s", "engines.train.options.tensor_parallel=2")
    assert [r["step"] for r in local] == list(range(1, STEPS + 1))
    for a, b in zip(local, ray_tp2, strict=True):
        # The trainer's log-probs match the rollout engine's: the synced weights arrived.
        assert a["training/rollout_probs_diff"] < 1e-4
        assert b["training/rollout_probs_diff"] < 1e-4
        for key in ("actor/loss", "actor/grad_norm", "actor/entropy", "critic/score/mean"):
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), (a["step"], key)
    assert local[-1]["actor/grad_norm"] > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU machine needs no shim")
def test_without_the_shim_cpu_init_fails_clearly(tmp_path):
    """On a CPU machine without the shim, init says how to run (no hang, no bare CUDA error)."""
    code = (
        "import sys; sys.path.insert(0, {!r})\n"
        "import fsdp_workers as fw\n"
        "from rlctl.engines.train.megatron.engine import MegatronEngine\n"
        "from rlctl.engines.train.contract import ModelEngineSpec\n"
        "from rlctl.config.pipeline import validate_recipe\n"
        "loaded = validate_recipe(fw.recipe(backend='megatron'))\n"
        "MegatronEngine(ModelEngineSpec.from_loaded(loaded, 'actor')).init()\n"
    ).format(str(HERE.parent / "fsdp"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path, check=False)
    assert proc.returncode != 0
    assert "only runs through the test shim" in proc.stderr
