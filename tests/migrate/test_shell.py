"""The launch-script reader of ``rlctl config migrate``: just enough bash, nothing run."""

from __future__ import annotations

import pytest

from rlctl.migrate.shell import ScriptError, read_script

SCRIPT = r"""#!/bin/bash
set -x
n_resp=16                      # responses per prompt
max_len=$((1024 * 2))
total=$(( (max_len + 512) / 2 ))
NNODES=${NNODES:-1}
MODEL="${MODEL_ROOT}/Qwen3"
files="['$HOME/a.parquet', '$HOME/b.parquet']"
export VLLM_USE_V1=1
echo "start"; python scripts/convert.py --in $MODEL
python3 -m verl.trainer.main_ppo --config-path=config \
    --config-name='ppo_megatron_trainer'\
    data.train_files="$files" \
    actor_rollout_ref.rollout.n=${n_resp} \
    data.max_prompt_length=$max_len \
    data.max_response_length=$total \
    trainer.nnodes=$NNODES \
    actor_rollout_ref.model.path=$MODEL \
    trainer.logger='["console","wandb"]' \
    trainer.experiment_name=run-$(date +%s) \
    trainer.project_name=\$literal $@
"""


def test_overrides_come_out_expanded(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(SCRIPT)
    call = read_script(path, {"HOME": "/h"})
    assert call.line == 11
    assert call.hydra_flags == {"--config-path": "config", "--config-name": "ppo_megatron_trainer"}
    assert call.overrides == (
        "data.train_files=['/h/a.parquet', '/h/b.parquet']",
        "actor_rollout_ref.rollout.n=16",
        "data.max_prompt_length=2048",
        "data.max_response_length=1280",
        "trainer.nnodes=1",
        "actor_rollout_ref.model.path=${MODEL_ROOT}/Qwen3",
        'trainer.logger=["console","wandb"]',
        "trainer.experiment_name=run-$(date +%s)",
        "trainer.project_name=$literal",
    )
    assert call.unresolved == {"$(date +%s)": ("trainer.experiment_name=run-$(date +%s)",),
                               "MODEL_ROOT": ("actor_rollout_ref.model.path=${MODEL_ROOT}/Qwen3",)}
    assert call.defaults_taken == {"NNODES": "1"}
    assert call.passes_extra_args


def test_var_plays_the_environment_script_assignments_still_win(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(SCRIPT)
    call = read_script(path, {"HOME": "/h", "NNODES": "4", "MODEL_ROOT": "/m", "n_resp": "2"})
    assert "trainer.nnodes=4" in call.overrides and call.defaults_taken == {}
    assert "actor_rollout_ref.rollout.n=16" in call.overrides
    assert "actor_rollout_ref.model.path=/m/Qwen3" in call.overrides


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("echo hi\n", "no `python3 -m verl.trainer.main_ppo` call"),
        ("python3 -m verl.trainer.main_ppo a=1\npython3 -m verl.trainer.main_ppo a=2\n",
         "2 verl.trainer.main_ppo calls"),
        ("python3 -m verl.trainer.main_ppo a='1\n", "unterminated single quote"),
        ("x=$((2 ** ))\npython3 -m verl.trainer.main_ppo a=$x\n", "not arithmetic"),
    ],
)
def test_script_errors(tmp_path, text, message):
    path = tmp_path / "run.sh"
    path.write_text(text)
    with pytest.raises(ScriptError, match=message):
        read_script(path)
