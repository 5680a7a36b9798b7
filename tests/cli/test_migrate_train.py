"""A recipe migrated from verl's current GRPO example trains: the tiny model swapped in, on CPU.

The script is verl main's examples/grpo_trainer/run_qwen3_8b_fsdp.sh (bash arrays, a ``case``
on the device, dynamic batch sizes), migrated as a new user would, then run for 2 steps with
the tiny Qwen3 (``model.path = "tiny"``) in one process (``--local``).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tomli_w

FIX = Path("tests/cli/migrate_fixtures/verl-main")


def _gsm8k_like(path: Path) -> None:
    """verl's gsm8k layout (examples/data_preprocess/gsm8k.py), short enough for the tiny model."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": f"{a}+{b}="}],
             "ability": "math", "reward_model": {"style": "rule", "ground_truth": str(a + b)},
             "extra_info": {"split": "train", "index": i}}
            for i, (a, b) in enumerate((a, b) for a in range(1, 5) for b in range(1, 5))]
    pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.mark.slow
def test_migrated_grpo_recipe_trains_2_steps_on_cpu(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # $HOME of the launch script -> tmp_path: the migrated data paths land on these files
    for name in ("gsm8k", "math"):
        for split in ("train", "test"):
            _gsm8k_like(tmp_path / "data" / name / f"{split}.parquet")
    migrated = tmp_path / "grpo.toml"
    rlctl("config", "migrate", str(FIX / "_generated_ppo_trainer.yaml"), "--verl-script",
          str(FIX / "grpo_qwen3-8b_fsdp.sh"), "--var", f"HOME={tmp_path}", "--var", "DEVICE=gpu",
          "--var", "EXPERIMENT_NAME=qwen3-grpo", "--reward", "gsm8k", "--train-rows", "7473",
          "-o", str(migrated))  # gsm8k's rows (ours are 32)
    recipe = tomllib.loads(migrated.read_text())
    assert recipe["data"]["train"] == [str(tmp_path / "data/gsm8k/train.parquet"),
                                       str(tmp_path / "data/math/train.parquet")]
    assert (recipe["algorithm"]["kl"]["in"], recipe["algorithm"]["kl"]["estimator"]) == \
        ("loss", "k3")
    # what a CPU needs: the hf engine has none of vLLM's options (a table -s cannot empty)
    recipe["engines"]["rollout"] = {"backend": "hf"}
    cpu = tmp_path / "cpu.toml"
    cpu.write_text(tomli_w.dumps(recipe))
    swaps = ["model.path=tiny", "run.device=cpu", f"run.output_dir={tmp_path / 'runs'}",
             "algorithm.prompts_per_step=4", "rollout.max_new_tokens=6",
             "data.max_prompt_tokens=32", "engines.train.ranks=1", "resources.devices_per_node=1",
             "engines.train.micro_batch_size=5", "engines.train.log_prob_micro_batch_size=20",
             "engines.train.options.mixed_precision=none", "data_plane.backend=memory",
             "resources.mode=local",
             "schedule.total_steps=2", "schedule.eval_every=0", "schedule.save_every=0"]
    args = [x for s in swaps for x in ("-s", s)]
    rlctl("config", "validate", str(cpu), *args)
    rlctl("train", str(cpu), *args, "--local", "--quiet")
    run_dir = tmp_path / "runs" / recipe["run"]["name"]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
            if line.strip()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all("actor/kl" in r and "actor/pg_loss" in r for r in rows)  # verl's KL-in-loss GRPO
