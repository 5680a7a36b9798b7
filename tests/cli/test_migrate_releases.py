"""``rlctl config migrate`` on verl's last releases and its main branch, as a new user runs it.

Fixtures (tests/cli/migrate_fixtures/verl-<release>/) are verl's published files, each with a
header naming repository, commit and path: the generated FSDP and Megatron trainer configs of
v0.7.1, v0.8.0, v0.9.0 and main (1dda039b), and 17 example launch scripts across GRPO, PPO
(with a critic), DAPO and RLOO, FSDP and Megatron, dense and MoE. The FSDP config is given
for every script, as verl's docs do: a script choosing Megatron (``model_engine=megatron``,
``--config-name ppo_megatron_trainer``) starts from that release's Megatron config.

Every fixture migrates (exit 0) unless it uses a feature rlctl lacks, and then every refusal
names a key the script sets; the batch numbers ``rlctl config show`` derives are verl's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from inline_snapshot import snapshot

from rlctl.migrate.shell import read_script

FIX = Path("tests/cli/migrate_fixtures")
COMMON = ["--var", "HOME=/data", "--var", "DEVICE=gpu", "--var", "EXPERIMENT_NAME=run",
          "--reward", "gsm8k", "--train-rows", "7473"]
EXTRA = {  # what a script reads from the environment without a default
    "verl-v0.9.0/grpo_moe_moonlight-16b_megatron.sh": ["--var", "DIST_CKPT_PATH=/ckpt"],
    "verl-main/grpo_moe_qwen3-30b-a3b_megatron.sh": ["--var", "PWD=/work"],
}
REFUSED = {  # features rlctl lacks: (the keys refused, all set by the script)
    # a 10-step warm-up over 16 optimizer steps per training step
    "verl-main/dapo_moe_qwen3-30b_fsdp.sh": ["actor_rollout_ref.actor.optim.lr_warmup_steps"],
    # ... and a model-config override (max_position_embeddings)
    "verl-main/dapo_qwen2.5-7b_fsdp.sh": [
        "actor_rollout_ref.actor.optim.lr_warmup_steps",
        "actor_rollout_ref.model.override_config.max_position_embeddings"],
}
CASES = sorted(str(p.relative_to(FIX)) for p in FIX.glob("verl-[mv]*/*.sh"))


def _migrate(rlctl, tmp_path: Path, case: str, *extra: str, code: int | None = None):  # type: ignore[no-untyped-def]
    out = tmp_path / "recipe.toml"
    yaml = FIX / case.split("/")[0] / "_generated_ppo_trainer.yaml"
    expected = (2 if case in REFUSED else 0) if code is None else code
    result = rlctl("config", "migrate", str(yaml), "--verl-script", str(FIX / case), *COMMON,
                   *EXTRA.get(case, []), "-o", str(out), *extra, code=expected)
    return result, out


def _problem_keys(stderr: str) -> list[str]:
    return [line.split(":", 1)[0].strip() for line in stderr.splitlines()
            if line.startswith("  ") and not line.startswith("    ")]


def test_the_fixtures_cover_what_verl_runs() -> None:
    names = [c.split("/")[1] for c in CASES]
    assert len(CASES) >= 12 and {c.split("/")[0] for c in CASES} == {
        "verl-v0.7.1", "verl-v0.8.0", "verl-v0.9.0", "verl-main"}
    for kind in ("grpo_", "ppo_", "dapo_", "rloo_", "_fsdp", "_megatron", "_moe_"):
        assert any(kind in n for n in names), kind
    for case in CASES:
        assert (FIX / case).read_text().startswith("# Fixture: verl-project/verl")


@pytest.mark.parametrize("case", CASES)
def test_a_release_fixture_migrates_or_refuses_only_what_its_script_sets(  # type: ignore[no-untyped-def]
    rlctl, tmp_path: Path, case: str,
) -> None:
    result, out = _migrate(rlctl, tmp_path, case)
    assert result.stdout == REPORTS[case]
    if case in REFUSED:
        assert not out.exists()
        refused = _problem_keys(result.stderr.split("nothing written:", 1)[1])
        assert refused == REFUSED[case]
        env = dict(v.split("=", 1) for v in (COMMON + EXTRA.get(case, []))[1::2] if "=" in v)
        script_keys = {o.split("=", 1)[0].lstrip("+~")
                       for o in read_script(FIX / case, env).overrides}
        assert set(refused) <= script_keys
        return
    # the batch table's verl column is what `rlctl config show` derives from the recipe
    shown = json.loads(rlctl("config", "show", str(out), "-f", "json").stdout)["derived"]
    table = {line.split()[0]: int(line.split()[1]) for line in result.stdout.splitlines()
             if line.startswith("   ") and line.split()[0] in shown}
    assert table == shown


def test_the_verbose_report_lists_the_defaults_and_every_key(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from omegaconf import OmegaConf

    from rlctl.migrate.verl_release import leaves

    case = "verl-main/grpo_qwen3-8b_fsdp.sh"
    result, _ = _migrate(rlctl, tmp_path, case, "--verbose")
    listed = {line[3:].split(" = ", 1)[0] for line in result.stdout.splitlines()
              if line.startswith(("   ", " * ", " y ")) and " = " in line}
    # the keys the issue saw refused (qat, turbo_config...) are at verl's default
    assert "   actor_rollout_ref.actor.fsdp_config.qat.mode = 'w4a16': off " \
        "(actor_rollout_ref.actor.fsdp_config.qat.enable is false)" in result.stdout
    assert "   actor_rollout_ref.actor.fsdp_config.turbo_config.distributed.fsdp_plan" \
        ".param_dtype = 'bf16': verl's default (a key rlctl does not know)" in result.stdout
    resolved = OmegaConf.to_container(OmegaConf.load(FIX / "verl-main/_generated_ppo_trainer.yaml"),
                                      resolve=True)
    missing = [k for k in leaves(resolved) if k not in listed and k != "actor_rollout_ref.rollout.name"]
    assert missing == []


def test_the_yaml_decides_the_release_and_the_base(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    case = "verl-main/grpo_qwen3-8b_megatron.sh"
    result, _ = _migrate(rlctl, tmp_path, case)
    assert "   verl's defaults: model_engine=megatron: verl main@1dda039b's generated megatron " \
        "config (shipped with rlctl), as verl composes it" in result.stdout
    result, _ = _migrate(rlctl, tmp_path, "verl-v0.8.0/rloo_qwen3-8b_fsdp.sh", "--force")
    assert "   verl's defaults: the YAML is verl v0.8.0's generated fsdp config" in result.stdout


def test_verl_version_chooses_the_defaults(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    case = "verl-v0.9.0/grpo_qwen3-4b_fsdp.sh"
    result, _ = _migrate(rlctl, tmp_path, case, "--verl-version", "v0.9.0")
    assert "verl's defaults: --verl-version v0.9.0: verl v0.9.0's fsdp defaults (0 leaves" \
        in result.stdout
    result, out = _migrate(rlctl, tmp_path / "new", case, "--verl-version", "v0.1", code=2)
    assert "--verl-version v0.1: rlctl has verl's defaults for v0.7.0, v0.7.1, v0.8.0, v0.9.0, " \
        "main" in result.stderr and not out.exists()


def test_a_users_own_config_is_diffed_against_the_closest_release(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # `main_ppo --cfg job` output: verl's config with the user's settings baked in, no header
    text = (FIX / "verl-main/_generated_ppo_trainer.yaml").read_text()
    text = re.sub(r"(?s)\A.*?\n(?=actor_rollout_ref:)", "", text)  # drop the headers
    text = text.replace("    clip_ratio_high: 0.2\n", "    clip_ratio_high: 0.28\n", 1)
    text = text.replace("      rank: 0\n", "      rank: 16\n", 1)  # model.lora.rank: LoRA
    mine = tmp_path / "mine.yaml"
    mine.write_text(text)
    out = tmp_path / "x.toml"
    result = rlctl("config", "migrate", str(mine), "--verl-script",
                   str(FIX / "verl-main/grpo_qwen3-8b_fsdp.sh"), *COMMON, "-o", str(out), code=2)
    assert "closest verl release: main@1dda039b (2 leaves of the YAML differ from its defaults" \
        in result.stdout
    assert " y actor_rollout_ref.model.lora.rank = 16: 16: verl's Megatron LoRA (model.lora.*, " \
        "Megatron module names): rlctl's megatron engine has no LoRA path (its fsdp engine " \
        "trains LoRA from model.lora_rank), which rlctl cannot reproduce" in result.stdout
    assert "fix: set it back to 0 in the YAML, or keep this run on verl" in result.stderr
    assert _problem_keys(result.stderr.split("nothing written:", 1)[1]) == [
        "actor_rollout_ref.model.lora.rank"]
    assert not out.exists()


# the report of each fixture, as a user sees it (stdout)
REPORTS = snapshot({'verl-main/dapo_moe_qwen3-30b_fsdp.sh': """\
verl config tests/cli/migrate_fixtures/verl-main/_generated_ppo_trainer.yaml + 70 overrides (70 from dapo_moe_qwen3-30b_fsdp.sh)
   launch script tests/cli/migrate_fixtures/verl-main/dapo_moe_qwen3-30b_fsdp.sh: main_ppo call at line 58
   the script's defaults used (--var NAME=VALUE changes one): CKPTS_DIR=/data/verl/ckpts/DAPO/DAPO-Qwen3-30B-A3B-Base-MATH-0527a1, MODEL_PATH=/data/verl/models/Qwen3-30B-A3B-Base, NGPUS_PER_NODE=8, NNODES=8, RAY_DATA_HOME=/data/verl, TEST_FILE=/data/verl/data/aime-2024.parquet, TRAIN_FILE=/data/verl/data/dapo-math-17k.parquet
   verl's defaults: the YAML is verl main@1dda039b's generated fsdp config
   919 verl keys: 46 set by you and migrated (30 mapped, 16 with no effect here), 1 refused, 872 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    8192          data.train_batch_size 512 x rollout.n 16
   prompts_per_minibatch                 32          actor.ppo_mini_batch_size (prompts)
   minibatch_size                       512          32 prompts x n 16
   data_parallel_size                    16          GPUs / model-parallel size
   minibatch_size_per_rank               32          verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                16          per rank / micro-batch 2 (dynamic in verl)
   grad_accumulation_steps               16          = micro-batches per rank
   optimizer_steps_per_train_step        16          16 minibatches x 1 epochs

notes:
   actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl uses a fixed number of samples (engines.train.micro_batch_size), which changes memory use, not the math
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

refused (1): cannot be migrated faithfully; why, and the fix
 * actor_rollout_ref.actor.optim.lr_warmup_steps = 10: verl steps the learning-rate schedule once per training step, rlctl once per optimizer step, and this recipe makes 16 optimizer steps per training step: the warm-up / decay would not match
       fix: use a constant schedule without warm-up, or one minibatch and one epoch

set by you and mapped (30): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.clip_ratio_c = 10.0 -> algorithm.loss.clip_ratio_c
 * actor_rollout_ref.actor.clip_ratio_high = 0.28 -> algorithm.loss.clip_high
 * actor_rollout_ref.actor.fsdp_config.param_offload = true -> engines.train.options.cpu_offload
 * actor_rollout_ref.actor.optim.weight_decay = 0.1 -> algorithm.optim.weight_decay
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 20480 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.ppo_mini_batch_size = 32 -> algorithm.minibatches
 * actor_rollout_ref.actor.use_dynamic_bsz = true -> engines.train.micro_batch_size
 * actor_rollout_ref.model.path = '/data/verl/models/Qwen3-30B-A3B-Base' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.8 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.n = 16 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * actor_rollout_ref.rollout.tensor_model_parallel_size = 4 -> engines.rollout.replicas
 * actor_rollout_ref.rollout.val_kwargs.do_sample = true -> rollout.val_temperature
 * actor_rollout_ref.rollout.val_kwargs.temperature = 1.0 -> rollout.val_temperature
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
 * data.max_prompt_length = 2048 -> data.max_prompt_tokens
 * data.train_batch_size = 512 -> algorithm.prompts_per_step
 * data.train_files = '/data/verl/data/dapo-math-17k.parquet' -> data.train
 * data.val_files = '/data/verl/data/aime-2024.parquet' -> data.val
 * reward_model.reward_kwargs.max_resp_len = 8192 -> algorithm.overlong.max_tokens (= rollout.max_new_tokens, unset)
 * reward_model.reward_kwargs.overlong_buffer_cfg.enable = true -> algorithm.overlong.buffer_len
 * reward_model.reward_kwargs.overlong_buffer_cfg.len = 4096 -> algorithm.overlong.buffer_len
 * reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor = 1.0 -> algorithm.overlong.penalty_factor
 * reward_model.reward_manager = 'dapo' -> algorithm.overlong
 * trainer.experiment_name = 'DAPO-Qwen3-30B-A3B-Base-MATH-0527a1' -> run.name
 * trainer.nnodes = 8 -> resources.nodes
 * trainer.project_name = 'DAPO' -> logging.sink_options
 * trainer.save_freq = 10 -> schedule.save_every
 * trainer.test_freq = 10 -> schedule.eval_every
 * trainer.total_training_steps = 300 -> schedule.total_steps

set by you, no effect here (16): why
 * actor_rollout_ref.actor.fsdp_config.fsdp_size = 32: 32: rlctl shards over all ranks (no HSDP); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.actor.fsdp_config.optimizer_offload = true: True: offload (memory); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.actor.kl_loss_coef = 0.0: the KL is off
 * actor_rollout_ref.actor.ulysses_sequence_parallel_size = 4: 4: Ulysses sequence parallelism (memory; rlctl's data parallelism covers the GPUs instead); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.ref.fsdp_config.param_offload = true: same as the actor's engine options (one [engines.train.options])
 * actor_rollout_ref.ref.log_prob_max_token_len_per_gpu = 30720: token budget of dynamic batching (memory)
 * actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu = 30720: token budget of dynamic batching (memory)
 * actor_rollout_ref.rollout.max_num_batched_tokens = 10240: server batching (speed)
 * actor_rollout_ref.rollout.val_kwargs.top_p = 0.7: rlctl validation samples with temperature only (validation, not training)
 * algorithm.kl_ctrl.kl_coef = 0.0: the KL is off
 * data.max_response_length = 8192: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * data.truncation = 'left': "left": rlctl never truncates prompts, it refuses over-long ones (data.max_prompt_tokens)
 * reward_model.reward_kwargs.overlong_buffer_cfg.log = false: metrics only: rlctl always logs reward/overlong
 * trainer.default_local_dir = '/data/verl/ckpts/DAPO/DAPO-Qwen3-30B-A3B-Base-MATH-0527a1': rlctl writes checkpoints under run.output_dir/run.name
 * trainer.log_val_generations = 10: validation logging
 * trainer.total_epochs = 10: trainer.total_training_steps is set

at verl's default (872):
    821 no effect in rlctl
     48 mapped to the recipe
      3 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-main/dapo_moe_qwen3-30b_megatron.sh': """\
verl config tests/cli/migrate_fixtures/verl-main/_generated_ppo_trainer.yaml + 74 overrides (74 from dapo_moe_qwen3-30b_megatron.sh)
   launch script tests/cli/migrate_fixtures/verl-main/dapo_moe_qwen3-30b_megatron.sh: main_ppo call at line 73
   the script's defaults used (--var NAME=VALUE changes one): CKPTS_DIR=/data/verl/checkpoints/DAPO-moe-fp16/qwen3moe_30b_a3b_fp16, MODEL_PATH=/data/verl/models/Qwen3-30B-A3B, RAY_DATA_HOME=/data/verl, TEST_FILE=/data/verl/data/aime-2024.parquet, TRAIN_FILE=/data/verl/data/dapo-math-17k.parquet
   verl's defaults: --config-name ppo_megatron_trainer: verl main@1dda039b's generated megatron config (shipped with rlctl), as verl composes it
   970 verl keys: 46 set by you and migrated (27 mapped, 19 with no effect here), 0 refused, 924 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                     512     512  data.train_batch_size 32 x rollout.n 16
   prompts_per_minibatch                 32      32  actor.ppo_mini_batch_size (prompts)
   minibatch_size                       512     512  32 prompts x n 16
   data_parallel_size                     2       2  GPUs / model-parallel size
   minibatch_size_per_rank              256     256  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank               128     128  per rank / micro-batch 2
   grad_accumulation_steps              128     128  = micro-batches per rank
   optimizer_steps_per_train_step         1       1  1 minibatches x 1 epochs

notes:
   schedule.total_steps = 10 epochs x (7473 rows // 32 prompts) = 2330 (before verl's over-long prompt filter, if any)
   reward_model.reward_manager = dapo without overlong_buffer_cfg: no overlong punishment (verl's dapo manager then scores like naive)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (27): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.clip_ratio_c = 10.0 -> algorithm.loss.clip_ratio_c
 * actor_rollout_ref.actor.clip_ratio_high = 0.28 -> algorithm.loss.clip_high
 * actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 4 -> engines.train.options.pipeline_parallel
 * actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 4 -> engines.train.options.tensor_parallel
 * actor_rollout_ref.actor.optim.lr_warmup_steps = 10 -> algorithm.optim.warmup_steps
 * actor_rollout_ref.actor.optim.weight_decay = 0.1 -> algorithm.optim.weight_decay
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 2 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.ppo_mini_batch_size = 32 -> algorithm.minibatches
 * actor_rollout_ref.model.path = '/data/verl/models/Qwen3-30B-A3B' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.7 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 4 -> engines.train.log_prob_micro_batch_size
 * actor_rollout_ref.rollout.n = 16 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * actor_rollout_ref.rollout.tensor_model_parallel_size = 8 -> engines.rollout.replicas
 * actor_rollout_ref.rollout.val_kwargs.do_sample = true -> rollout.val_temperature
 * actor_rollout_ref.rollout.val_kwargs.temperature = 1.0 -> rollout.val_temperature
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
 * data.max_prompt_length = 2048 -> data.max_prompt_tokens
 * data.train_batch_size = 32 -> algorithm.prompts_per_step
 * data.train_files = '/data/verl/data/dapo-math-17k.parquet' -> data.train
 * data.val_files = '/data/verl/data/aime-2024.parquet' -> data.val
 * reward_model.reward_manager = 'dapo' -> algorithm.overlong
 * trainer.experiment_name = 'qwen3moe_30b_a3b_fp16' -> run.name
 * trainer.nnodes = 4 -> resources.nodes
 * trainer.project_name = 'DAPO-moe-fp16' -> logging.sink_options
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 10 -> schedule.total_steps

set by you, no effect here (19): why
 * actor_rollout_ref.actor.kl_loss_coef = 0.0: the KL is off
 * actor_rollout_ref.actor.megatron.dtype = 'float16': rlctl's megatron engine computes in model.dtype (float32 keeps verl's fp32 master weights; verl computes in bf16)
 * actor_rollout_ref.actor.megatron.expert_model_parallel_size = 8: 8: rlctl's megatron engine supports only 1 (a parallel layout: the math is the same with more data parallelism)
 * actor_rollout_ref.actor.megatron.grad_offload = true: True: offload (memory); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.actor.megatron.optimizer_offload = true: True: offload (memory); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.actor.megatron.override_transformer_config.apply_rope_fusion = true: kernel fusion
 * actor_rollout_ref.actor.megatron.param_offload = true: True: offload (memory); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 10240: used only with use_dynamic_bsz
 * actor_rollout_ref.model.use_fused_kernels = true: kernel choice
 * actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 4: same as the rollout's log-prob micro-batch (rlctl has one)
 * actor_rollout_ref.rollout.dtype = 'float16': rlctl's rollout runs in model.dtype
 * actor_rollout_ref.rollout.max_num_batched_tokens = 10240: server batching (speed)
 * actor_rollout_ref.rollout.val_kwargs.top_p = 0.7: rlctl validation samples with temperature only (validation, not training)
 * algorithm.kl_ctrl.kl_coef = 0.0: the KL is off
 * data.max_response_length = 8192: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * data.truncation = 'left': "left": rlctl never truncates prompts, it refuses over-long ones (data.max_prompt_tokens)
 * trainer.default_local_dir = '/data/verl/checkpoints/DAPO-moe-fp16/qwen3moe_30b_a3b_fp16': rlctl writes checkpoints under run.output_dir/run.name
 * trainer.log_val_generations = 10: validation logging
 * trainer.val_before_train = false: off

at verl's default (924):
    871 no effect in rlctl
     51 mapped to the recipe
      2 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-main/dapo_qwen2.5-7b_fsdp.sh': """\
verl config tests/cli/migrate_fixtures/verl-main/_generated_ppo_trainer.yaml + 71 overrides (71 from dapo_qwen2.5-7b_fsdp.sh)
   launch script tests/cli/migrate_fixtures/verl-main/dapo_qwen2.5-7b_fsdp.sh: main_ppo call at line 61
   the script's defaults used (--var NAME=VALUE changes one): CKPTS_DIR=/data/verl/ckpts/DAPO/DAPO-Qwen2.5-7b-MATH-0527a1, MODEL_PATH=/data/verl/models/Qwen2.5-Math-7B, NGPUS_PER_NODE=8, NNODES=8, RAY_DATA_HOME=/data/verl, TEST_FILE=/data/verl/data/aime-2024.parquet, TRAIN_FILE=/data/verl/data/dapo-math-17k.parquet
   verl's defaults: the YAML is verl main@1dda039b's generated fsdp config
   919 verl keys: 46 set by you and migrated (30 mapped, 16 with no effect here), 2 refused, 871 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    8192          data.train_batch_size 512 x rollout.n 16
   prompts_per_minibatch                 32          actor.ppo_mini_batch_size (prompts)
   minibatch_size                       512          32 prompts x n 16
   data_parallel_size                    16          GPUs / model-parallel size
   minibatch_size_per_rank               32          verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                16          per rank / micro-batch 2 (dynamic in verl)
   grad_accumulation_steps               16          = micro-batches per rank
   optimizer_steps_per_train_step        16          16 minibatches x 1 epochs

notes:
   actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl uses a fixed number of samples (engines.train.micro_batch_size), which changes memory use, not the math
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

refused (2): cannot be migrated faithfully; why, and the fix
 * actor_rollout_ref.actor.optim.lr_warmup_steps = 10: verl steps the learning-rate schedule once per training step, rlctl once per optimizer step, and this recipe makes 16 optimizer steps per training step: the warm-up / decay would not match
       fix: use a constant schedule without warm-up, or one minibatch and one epoch
 * actor_rollout_ref.model.override_config.max_position_embeddings = 32768: 32768: an override of the model's config, which rlctl cannot reproduce
       fix: remove '+actor_rollout_ref.model.override_config.max_position_embeddings=32768' (dapo_qwen2.5-7b_fsdp.sh), or keep this run on verl

set by you and mapped (30): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.clip_ratio_c = 10.0 -> algorithm.loss.clip_ratio_c
 * actor_rollout_ref.actor.clip_ratio_high = 0.28 -> algorithm.loss.clip_high
 * actor_rollout_ref.actor.fsdp_config.param_offload = true -> engines.train.options.cpu_offload
 * actor_rollout_ref.actor.optim.weight_decay = 0.1 -> algorithm.optim.weight_decay
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 20480 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.ppo_mini_batch_size = 32 -> algorithm.minibatches
 * actor_rollout_ref.actor.use_dynamic_bsz = true -> engines.train.micro_batch_size
 * actor_rollout_ref.model.path = '/data/verl/models/Qwen2.5-Math-7B' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.8 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.n = 16 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * actor_rollout_ref.rollout.tensor_model_parallel_size = 4 -> engines.rollout.replicas
 * actor_rollout_ref.rollout.val_kwargs.do_sample = true -> rollout.val_temperature
 * actor_rollout_ref.rollout.val_kwargs.temperature = 1.0 -> rollout.val_temperature
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
 * data.max_prompt_length = 2048 -> data.max_prompt_tokens
 * data.train_batch_size = 512 -> algorithm.prompts_per_step
 * data.train_files = '/data/verl/data/dapo-math-17k.parquet' -> data.train
 * data.val_files = '/data/verl/data/aime-2024.parquet' -> data.val
 * reward_model.reward_kwargs.max_resp_len = 8192 -> algorithm.overlong.max_tokens (= rollout.max_new_tokens, unset)
 * reward_model.reward_kwargs.overlong_buffer_cfg.enable = true -> algorithm.overlong.buffer_len
 * reward_model.reward_kwargs.overlong_buffer_cfg.len = 4096 -> algorithm.overlong.buffer_len
 * reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor = 1.0 -> algorithm.overlong.penalty_factor
 * reward_model.reward_manager = 'dapo' -> algorithm.overlong
 * trainer.experiment_name = 'DAPO-Qwen2.5-7b-MATH-0527a1' -> run.name
 * trainer.nnodes = 8 -> resources.nodes
 * trainer.project_name = 'DAPO' -> logging.sink_options
 * trainer.save_freq = 10 -> schedule.save_every
 * trainer.test_freq = 10 -> schedule.eval_every
 * trainer.total_training_steps = 200 -> schedule.total_steps

set by you, no effect here (16): why
 * actor_rollout_ref.actor.fsdp_config.fsdp_size = 32: 32: rlctl shards over all ranks (no HSDP); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.actor.fsdp_config.optimizer_offload = true: True: offload (memory); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.actor.kl_loss_coef = 0.0: the KL is off
 * actor_rollout_ref.actor.ulysses_sequence_parallel_size = 4: 4: Ulysses sequence parallelism (memory; rlctl's data parallelism covers the GPUs instead); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.ref.fsdp_config.param_offload = true: same as the actor's engine options (one [engines.train.options])
 * actor_rollout_ref.ref.log_prob_max_token_len_per_gpu = 30720: token budget of dynamic batching (memory)
 * actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu = 30720: token budget of dynamic batching (memory)
 * actor_rollout_ref.rollout.max_num_batched_tokens = 10240: server batching (speed)
 * actor_rollout_ref.rollout.val_kwargs.top_p = 0.7: rlctl validation samples with temperature only (validation, not training)
 * algorithm.kl_ctrl.kl_coef = 0.0: the KL is off
 * data.max_response_length = 8192: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * data.truncation = 'left': "left": rlctl never truncates prompts, it refuses over-long ones (data.max_prompt_tokens)
 * reward_model.reward_kwargs.overlong_buffer_cfg.log = false: metrics only: rlctl always logs reward/overlong
 * trainer.default_local_dir = '/data/verl/ckpts/DAPO/DAPO-Qwen2.5-7b-MATH-0527a1': rlctl writes checkpoints under run.output_dir/run.name
 * trainer.log_val_generations = 10: validation logging
 * trainer.total_epochs = 10: trainer.total_training_steps is set

at verl's default (871):
    820 no effect in rlctl
     48 mapped to the recipe
      3 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-main/grpo_moe_qwen3-30b-a3b_fsdp.sh': """\
verl config tests/cli/migrate_fixtures/verl-main/_generated_ppo_trainer.yaml + 42 overrides (42 from grpo_moe_qwen3-30b-a3b_fsdp.sh)
   launch script tests/cli/migrate_fixtures/verl-main/grpo_moe_qwen3-30b-a3b_fsdp.sh: main_ppo call at line 115
   the script's defaults used (--var NAME=VALUE changes one): ACTOR_LR=1e-6, ENTROPY_COEFF=0, KL_LOSS_COEF=0.001, MAX_PROMPT_LENGTH=2048, MAX_RESPONSE_LENGTH=4096, MODEL_PATH=Qwen/Qwen3-30B-A3B, NGPUS_PER_NODE=8, NNODES=1, PPO_MAX_TOKEN_LEN_PER_GPU=32768, PPO_MINI_BATCH_SIZE=128, PROJECT_NAME=verl_grpo_gsm8k_math, ROLLOUT_GPU_MEM_UTIL=0.6, ROLLOUT_N=8, ROLLOUT_TP=4, SAVE_FREQ=20, TEST_FREQ=5, TOTAL_EPOCHS=15, TRAIN_BATCH_SIZE=512
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: the YAML is verl main@1dda039b's generated fsdp config
   914 verl keys: 26 set by you and migrated (21 mapped, 5 with no effect here), 0 refused, 888 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    4096    4096  data.train_batch_size 512 x rollout.n 8
   prompts_per_minibatch                128     128  actor.ppo_mini_batch_size (prompts)
   minibatch_size                      1024    1024  128 prompts x n 8
   data_parallel_size                     8       8  GPUs / model-parallel size
   minibatch_size_per_rank              128     128  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                26      26  per rank / micro-batch 5 (dynamic in verl)
   grad_accumulation_steps               26      26  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl uses a fixed number of samples (engines.train.micro_batch_size), which changes memory use, not the math
   schedule.total_steps = 15 epochs x (7473 rows // 512 prompts) = 210 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (21): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.fsdp_config.param_offload = true -> engines.train.options.cpu_offload
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 32768 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.ppo_mini_batch_size = 128 -> algorithm.minibatches
 * actor_rollout_ref.actor.strategy = 'fsdp2' -> engines.train.backend
 * actor_rollout_ref.actor.use_dynamic_bsz = true -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_kl_loss = true -> algorithm.kl.in
 * actor_rollout_ref.model.path = 'Qwen/Qwen3-30B-A3B' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.n = 8 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * actor_rollout_ref.rollout.tensor_model_parallel_size = 4 -> engines.rollout.replicas
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
 * data.max_prompt_length = 2048 -> data.max_prompt_tokens
 * data.train_batch_size = 512 -> algorithm.prompts_per_step
 * data.train_files = ['/data/data/gsm8k/train.parquet', '/data/data/math/train... -> data.train
 * data.val_files = ['/data/data/gsm8k/test.parquet', '/data/data/math/test.p... -> data.val
 * trainer.experiment_name = 'run' -> run.name
 * trainer.project_name = 'verl_grpo_gsm8k_math' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (5): why
 * actor_rollout_ref.actor.fsdp_config.optimizer_offload = true: True: offload (memory); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.ref.fsdp_config.param_offload = true: same as the actor's engine options (one [engines.train.options])
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 4096: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * ray_kwargs.ray_init.runtime_env.py_executable = 'uv -v run --frozen --all-packages --extra vllm --extra f...: Ray start-up

at verl's default (888):
    830 no effect in rlctl
     56 mapped to the recipe
      2 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-main/grpo_moe_qwen3-30b-a3b_megatron.sh': """\
verl config tests/cli/migrate_fixtures/verl-main/_generated_ppo_trainer.yaml + 103 overrides (103 from grpo_moe_qwen3-30b-a3b_megatron.sh)
   launch script tests/cli/migrate_fixtures/verl-main/grpo_moe_qwen3-30b-a3b_megatron.sh: main_ppo call at line 267
   the script's defaults used (--var NAME=VALUE changes one): ACTOR_CLIP_RATIO_C=10.0, ACTOR_CLIP_RATIO_HIGH=0.28, ACTOR_CLIP_RATIO_LOW=0.2, ACTOR_CP=1, ACTOR_EP=2, ACTOR_LR=1e-5, ACTOR_PP=2, ACTOR_PPO_MICRO_BATCH_SIZE_PER_GPU=2, ACTOR_TP=4, ACTOR_VPP=2, AIME_VAL=/work/data/AIME-2024/data/aime-2024.parquet, ALL_OFFLOAD=True, DAPO_MATH_TRAIN=/work/data/DAPO-Math-17k/data/dapo-math-17k.parquet, DATA_DIR=/work, ENTROPY_COEFF=0, GEN_MOE_EP=2, GEN_MOE_TP=2, GPUS_PER_NODE=8, INFER_BACKEND=vllm, INFER_TP=4, LOG_VAL_GENERATIONS=10, MAX_PROMPT_LENGTH=2048, MAX_RESPONSE_LENGTH=8192, MODEL_PATH=Qwen/Qwen3-30B-A3B-Base, NGPUS_PER_NODE=8, NNODES=1, PPO_MAX_TOKEN_LEN_PER_GPU=30720, PPO_MINI_BATCH_SIZE=16, PROJECT_NAME=verl_grpo_dapo_math, REF_CP=1, REF_EP=2, REF_LOG_PROB_MAX_TOKEN_LEN_PER_GPU=40960, REF_LOG_PROB_MICRO_BATCH_SIZE_PER_GPU=4, REF_PP=2, REF_TP=4, REF_VPP=2, ROLLOUT_GPU_MEM_UTIL=0.6, ROLLOUT_LOG_PROB_MAX_TOKEN_LEN_PER_GPU=40960, ROLLOUT_LOG_PROB_MICRO_BATCH_SIZE_PER_GPU=4, ROLLOUT_MAX_MODEL_LEN=10240, ROLLOUT_MAX_NUM_BATCHED_TOKENS=10240, ROLLOUT_MAX_NUM_SEQS=1024, ROLLOUT_N=8, ROLLOUT_TEMPERATURE=1.0, ROLLOUT_TOP_P=1, ROLLOUT_TP=4, SAVE_FREQ=50, TEST_FREQ=5, TOTAL_EPOCHS=1000, TRAIN_BATCH_SIZE=512, TRAIN_FILES=/work/data/DAPO-Math-17k/data/dapo-math-17k.parquet, TRTLLM_UPDATE_WEIGHTS_BUCKET_MEGABYTES=4096, VAL_DO_SAMPLE=True, VAL_FILES=/work/data/AIME-2024/data/aime-2024.parquet, VAL_N=1, VAL_TEMPERATURE=1.0, VAL_TOP_P=0.7
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: model_engine=megatron: verl main@1dda039b's generated megatron config (shipped with rlctl), as verl composes it
   model_engine=megatron (grpo_moe_qwen3-30b-a3b_megatron.sh): config-group choice: verl's megatron config
   992 verl keys: 68 set by you and migrated (35 mapped, 33 with no effect here), 0 refused, 924 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    4096    4096  data.train_batch_size 512 x rollout.n 8
   prompts_per_minibatch                 16      16  actor.ppo_mini_batch_size (prompts)
   minibatch_size                       128     128  16 prompts x n 8
   data_parallel_size                     1       1  GPUs / model-parallel size
   minibatch_size_per_rank              128     128  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                64      64  per rank / micro-batch 2 (dynamic in verl)
   grad_accumulation_steps               64      64  = micro-batches per rank
   optimizer_steps_per_train_step        32      32  32 minibatches x 1 epochs

notes:
   actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl uses a fixed number of samples (engines.train.micro_batch_size), which changes memory use, not the math
   schedule.total_steps = 1000 epochs x (7473 rows // 512 prompts) = 14000 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (35): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.clip_ratio_c = 10.0 -> algorithm.loss.clip_ratio_c
 * actor_rollout_ref.actor.clip_ratio_high = 0.28 -> algorithm.loss.clip_high
 * actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity = 'full' -> engines.train.options.recompute_granularity
 * actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 2 -> engines.train.options.pipeline_parallel
 * actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 4 -> engines.train.options.tensor_parallel
 * actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size = 2 -> engines.train.options.virtual_pipeline_parallel
 * actor_rollout_ref.actor.optim.lr = 1e-05 -> algorithm.optim.lr
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 30720 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 2 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.ppo_mini_batch_size = 16 -> algorithm.minibatches
 * actor_rollout_ref.actor.use_dynamic_bsz = true -> engines.train.micro_batch_size
 * actor_rollout_ref.model.path = 'Qwen/Qwen3-30B-A3B-Base' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 4 -> engines.train.log_prob_micro_batch_size
 * actor_rollout_ref.rollout.max_model_len = 10240 -> engines.rollout.options.max_model_len
 * actor_rollout_ref.rollout.n = 8 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * actor_rollout_ref.rollout.tensor_model_parallel_size = 4 -> engines.rollout.replicas
 * actor_rollout_ref.rollout.val_kwargs.do_sample = true -> rollout.val_temperature
 * actor_rollout_ref.rollout.val_kwargs.temperature = 1.0 -> rollout.val_temperature
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
 * data.max_prompt_length = 2048 -> data.max_prompt_tokens
 * data.train_batch_size = 512 -> algorithm.prompts_per_step
 * data.train_files = '/work/data/DAPO-Math-17k/data/dapo-math-17k.parquet' -> data.train
 * data.val_files = '/work/data/AIME-2024/data/aime-2024.parquet' -> data.val
 * reward_model.reward_kwargs.max_resp_len = 8192 -> algorithm.overlong.max_tokens (= rollout.max_new_tokens, unset)
 * reward_model.reward_kwargs.overlong_buffer_cfg.enable = true -> algorithm.overlong.buffer_len
 * reward_model.reward_kwargs.overlong_buffer_cfg.len = 4096 -> algorithm.overlong.buffer_len
 * reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor = 1.0 -> algorithm.overlong.penalty_factor
 * reward_model.reward_manager = 'dapo' -> algorithm.overlong
 * trainer.experiment_name = 'run' -> run.name
 * trainer.project_name = 'verl_grpo_dapo_math' -> logging.sink_options
 * trainer.save_freq = 50 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 1000 -> schedule.total_steps

set by you, no effect here (33): why
 * actor_rollout_ref.actor.kl_loss_coef = 0.0: the KL is off
 * actor_rollout_ref.actor.megatron.expert_model_parallel_size = 2: 2: rlctl's megatron engine supports only 1 (a parallel layout: the math is the same with more data parallelism)
 * actor_rollout_ref.actor.megatron.grad_offload = true: True: offload (memory); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.actor.megatron.optimizer_offload = true: True: offload (memory); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.actor.megatron.override_transformer_config.apply_rope_fusion = true: kernel fusion
 * actor_rollout_ref.actor.megatron.override_transformer_config.bias_activation_fusion = true: kernel fusion
 * actor_rollout_ref.actor.megatron.override_transformer_config.bias_dropout_fusion = true: kernel fusion
 * actor_rollout_ref.actor.megatron.override_transformer_config.deallocate_pipeline_outputs = true: memory
 * actor_rollout_ref.actor.megatron.override_transformer_config.gradient_accumulation_fusion = true: kernel fusion
 * actor_rollout_ref.actor.megatron.override_transformer_config.masked_softmax_fusion = true: kernel fusion
 * actor_rollout_ref.actor.megatron.override_transformer_config.moe_grouped_gemm = true: MoE kernel choice
 * actor_rollout_ref.actor.megatron.override_transformer_config.moe_permute_fusion = true: kernel fusion
 * actor_rollout_ref.actor.megatron.override_transformer_config.persist_layer_norm = true: kernel choice
 * actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method = 'uniform': recompute detail (the granularity is mapped)
 * actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers = 1: recompute detail (the granularity is mapped)
 * actor_rollout_ref.actor.megatron.param_offload = true: True: offload (memory); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.model.use_fused_kernels = true: kernel choice
 * actor_rollout_ref.ref.log_prob_max_token_len_per_gpu = 40960: token budget of dynamic batching (memory)
 * actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 4: same as the rollout's log-prob micro-batch (rlctl has one)
 * actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes = 4096: weight-sync transport
 * actor_rollout_ref.rollout.expert_parallel_size = 2: 2: rollout layout; rlctl lacks it (no effect on the math)
 * actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu = 40960: token budget of dynamic batching (memory)
 * actor_rollout_ref.rollout.max_num_batched_tokens = 10240: server batching (speed)
 * actor_rollout_ref.rollout.max_num_seqs = 1024: server batching (speed)
 * actor_rollout_ref.rollout.moe_tensor_parallel_size = 2: 2: rollout layout (the experts' tensor parallelism in the rollout server); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.rollout.val_kwargs.top_p = 0.7: rlctl validation samples with temperature only (validation, not training)
 * algorithm.kl_ctrl.kl_coef = 0.0: the KL is off
 * data.max_response_length = 8192: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * data.truncation = 'left': "left": rlctl never truncates prompts, it refuses over-long ones (data.max_prompt_tokens)
 * ray_kwargs.ray_init.runtime_env.py_executable = 'uv -v run --frozen --all-packages --extra vllm --extra m...: Ray start-up
 * reward_model.reward_kwargs.overlong_buffer_cfg.log = false: metrics only: rlctl always logs reward/overlong
 * trainer.log_val_generations = 10: validation logging
 * trainer.val_before_train = false: off

at verl's default (924):
    872 no effect in rlctl
     49 mapped to the recipe
      3 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-main/grpo_qwen3-8b_fsdp.sh': """\
verl config tests/cli/migrate_fixtures/verl-main/_generated_ppo_trainer.yaml + 41 overrides (41 from grpo_qwen3-8b_fsdp.sh)
   launch script tests/cli/migrate_fixtures/verl-main/grpo_qwen3-8b_fsdp.sh: main_ppo call at line 199
   the script's defaults used (--var NAME=VALUE changes one): ACTOR_LR=1e-6, ENTROPY_COEFF=0, INFER_BACKEND=vllm, KL_LOSS_COEF=0.001, MAX_PROMPT_LENGTH=1024, MAX_RESPONSE_LENGTH=2048, MODEL_PATH=Qwen/Qwen3-8B, NGPUS_PER_NODE=8, NNODES=1, PPO_MAX_TOKEN_LEN_PER_GPU=24576, PPO_MINI_BATCH_SIZE=256, PROJECT_NAME=verl_grpo_gsm8k_math, ROLLOUT_N=5, SAVE_FREQ=20, TEST_FREQ=5, TOTAL_EPOCHS=15, TRAIN_BATCH_SIZE=1024, rollout_gpu_mem_util=0.6, rollout_tp=2
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: the YAML is verl main@1dda039b's generated fsdp config
   914 verl keys: 20 set by you and migrated (16 mapped, 4 with no effect here), 0 refused, 894 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    5120    5120  data.train_batch_size 1024 x rollout.n 5
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                      1280    1280  256 prompts x n 5
   data_parallel_size                     8       8  GPUs / model-parallel size
   minibatch_size_per_rank              160     160  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                20      20  per rank / micro-batch 8 (dynamic in verl)
   grad_accumulation_steps               20      20  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl uses a fixed number of samples (engines.train.micro_batch_size), which changes memory use, not the math
   schedule.total_steps = 15 epochs x (7473 rows // 1024 prompts) = 105 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (16): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 24576 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_dynamic_bsz = true -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_kl_loss = true -> algorithm.kl.in
 * actor_rollout_ref.model.path = 'Qwen/Qwen3-8B' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.n = 5 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
 * data.train_files = ['/data/data/gsm8k/train.parquet', '/data/data/math/train... -> data.train
 * data.val_files = ['/data/data/gsm8k/test.parquet', '/data/data/math/test.p... -> data.val
 * trainer.experiment_name = 'run' -> run.name
 * trainer.project_name = 'verl_grpo_gsm8k_math' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (4): why
 * actor_rollout_ref.ref.fsdp_config.param_offload = true: rlctl uses the actor's engine options (one [engines.train.options]) (False) here
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 2048: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * ray_kwargs.ray_init.runtime_env.py_executable = 'uv -v run --frozen --all-packages --extra vllm --extra f...: Ray start-up

at verl's default (894):
    830 no effect in rlctl
     63 mapped to the recipe
      1 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-main/grpo_qwen3-8b_megatron.sh': """\
verl config tests/cli/migrate_fixtures/verl-main/_generated_ppo_trainer.yaml + 42 overrides (42 from grpo_qwen3-8b_megatron.sh)
   launch script tests/cli/migrate_fixtures/verl-main/grpo_qwen3-8b_megatron.sh: main_ppo call at line 116
   the script's defaults used (--var NAME=VALUE changes one): ACTOR_LR=1e-6, ACTOR_PP=2, ACTOR_TP=2, ENTROPY_COEFF=0, INFER_BACKEND=vllm, KL_LOSS_COEF=0.001, MAX_PROMPT_LENGTH=1024, MAX_RESPONSE_LENGTH=2048, MODEL_PATH=Qwen/Qwen3-8B, NGPUS_PER_NODE=8, NNODES=1, PPO_MAX_TOKEN_LEN_PER_GPU=24576, PPO_MINI_BATCH_SIZE=256, PROJECT_NAME=verl_grpo_gsm8k_math, ROLLOUT_GPU_MEM_UTIL=0.6, ROLLOUT_N=5, ROLLOUT_TP=2, SAVE_FREQ=20, TEST_FREQ=5, TOTAL_EPOCHS=15, TRAIN_BATCH_SIZE=1024
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: model_engine=megatron: verl main@1dda039b's generated megatron config (shipped with rlctl), as verl composes it
   model_engine=megatron (grpo_qwen3-8b_megatron.sh): config-group choice: verl's megatron config
   968 verl keys: 21 set by you and migrated (18 mapped, 3 with no effect here), 0 refused, 947 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    5120    5120  data.train_batch_size 1024 x rollout.n 5
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                      1280    1280  256 prompts x n 5
   data_parallel_size                     2       2  GPUs / model-parallel size
   minibatch_size_per_rank              640     640  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                80      80  per rank / micro-batch 8 (dynamic in verl)
   grad_accumulation_steps               80      80  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl uses a fixed number of samples (engines.train.micro_batch_size), which changes memory use, not the math
   schedule.total_steps = 15 epochs x (7473 rows // 1024 prompts) = 105 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (18): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 2 -> engines.train.options.pipeline_parallel
 * actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 2 -> engines.train.options.tensor_parallel
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 24576 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_dynamic_bsz = true -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_kl_loss = true -> algorithm.kl.in
 * actor_rollout_ref.model.path = 'Qwen/Qwen3-8B' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.n = 5 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
 * data.train_files = ['/data/data/gsm8k/train.parquet', '/data/data/math/train... -> data.train
 * data.val_files = ['/data/data/gsm8k/test.parquet', '/data/data/math/test.p... -> data.val
 * trainer.experiment_name = 'run' -> run.name
 * trainer.project_name = 'verl_grpo_gsm8k_math' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (3): why
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 2048: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * ray_kwargs.ray_init.runtime_env.py_executable = 'uv -v run --frozen --all-packages --extra vllm --extra m...: Ray start-up

at verl's default (947):
    882 no effect in rlctl
     62 mapped to the recipe
      3 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-main/ppo_qwen3-8b_fsdp.sh': """\
verl config tests/cli/migrate_fixtures/verl-main/_generated_ppo_trainer.yaml + 46 overrides (46 from ppo_qwen3-8b_fsdp.sh)
   launch script tests/cli/migrate_fixtures/verl-main/ppo_qwen3-8b_fsdp.sh: main_ppo call at line 125
   the script's defaults used (--var NAME=VALUE changes one): ACTOR_LR=1e-6, CRITIC_LR=1e-5, CRITIC_MODEL_PATH=Qwen/Qwen3-8B, ENTROPY_COEFF=0, GSM8K_TEST_FILE=/data/data/gsm8k/test.parquet, GSM8K_TRAIN_FILE=/data/data/gsm8k/train.parquet, INFER_BACKEND=vllm, MATH_TEST_FILE=/data/data/math/test.parquet, MATH_TRAIN_FILE=/data/data/math/train.parquet, MAX_PROMPT_LENGTH=1024, MAX_RESPONSE_LENGTH=2048, MODEL_PATH=Qwen/Qwen3-8B, NDEVICES_PER_NODE=8, NNODES=1, PPO_MAX_TOKEN_LEN_PER_GPU=24576, PPO_MINI_BATCH_SIZE=256, PROJECT_NAME=verl_ppo_gsm8k_math, ROLLOUT_GPU_MEM_UTIL=0.6, ROLLOUT_N=1, ROLLOUT_TP=2, SAVE_FREQ=20, TEST_FREQ=5, TOTAL_EPOCHS=15, TRAIN_BATCH_SIZE=1024
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: the YAML is verl main@1dda039b's generated fsdp config
   914 verl keys: 19 set by you and migrated (14 mapped, 5 with no effect here), 0 refused, 895 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    1024    1024  data.train_batch_size 1024 x rollout.n 1
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                       256     256  256 prompts x n 1
   data_parallel_size                     8       8  GPUs / model-parallel size
   minibatch_size_per_rank               32      32  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                 4       4  per rank / micro-batch 8 (dynamic in verl)
   grad_accumulation_steps                4       4  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl uses a fixed number of samples (engines.train.micro_batch_size), which changes memory use, not the math
   schedule.total_steps = 15 epochs x (7473 rows // 1024 prompts) = 105 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (14): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 24576 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_dynamic_bsz = true -> engines.train.micro_batch_size
 * actor_rollout_ref.model.path = 'Qwen/Qwen3-8B' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * critic.model.path = 'Qwen/Qwen3-8B' -> critic.path
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
 * data.train_files = ['/data/data/gsm8k/train.parquet', '/data/data/math/train... -> data.train
 * data.val_files = ['/data/data/gsm8k/test.parquet', '/data/data/math/test.p... -> data.val
 * trainer.experiment_name = 'run' -> run.name
 * trainer.project_name = 'verl_ppo_gsm8k_math' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (5): why
 * actor_rollout_ref.ref.fsdp_config.param_offload = true: rlctl uses the actor's engine options (one [engines.train.options]) (False) here
 * critic.ppo_max_token_len_per_gpu = 24576: token budget of dynamic batching (memory)
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 2048: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * ray_kwargs.ray_init.runtime_env.py_executable = 'uv -v run --frozen --all-packages --extra vllm --extra f...: Ray start-up

at verl's default (895):
    826 no effect in rlctl
     68 mapped to the recipe
      1 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-main/ppo_qwen3-8b_megatron.sh': """\
verl config tests/cli/migrate_fixtures/verl-main/_generated_ppo_trainer.yaml + 46 overrides (46 from ppo_qwen3-8b_megatron.sh)
   launch script tests/cli/migrate_fixtures/verl-main/ppo_qwen3-8b_megatron.sh: main_ppo call at line 131
   the script's defaults used (--var NAME=VALUE changes one): ACTOR_LR=1e-6, ACTOR_PP=2, ACTOR_TP=2, CRITIC_LR=1e-5, CRITIC_MODEL_PATH=Qwen/Qwen3-8B, CRITIC_PP=2, CRITIC_TP=2, ENTROPY_COEFF=0, GSM8K_TEST_FILE=/data/data/gsm8k/test.parquet, GSM8K_TRAIN_FILE=/data/data/gsm8k/train.parquet, MATH_TEST_FILE=/data/data/math/test.parquet, MATH_TRAIN_FILE=/data/data/math/train.parquet, MAX_PROMPT_LENGTH=1024, MAX_RESPONSE_LENGTH=2048, MODEL_PATH=Qwen/Qwen3-8B, NGPUS_PER_NODE=8, NNODES=1, PPO_MAX_TOKEN_LEN_PER_GPU=24576, PPO_MINI_BATCH_SIZE=256, PROJECT_NAME=verl_ppo_gsm8k_math, ROLLOUT_GPU_MEM_UTIL=0.6, ROLLOUT_N=1, ROLLOUT_TP=2, SAVE_FREQ=20, TEST_FREQ=5, TOTAL_EPOCHS=15, TRAIN_BATCH_SIZE=1024
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: model_engine=megatron: verl main@1dda039b's generated megatron config (shipped with rlctl), as verl composes it
   model_engine=megatron (ppo_qwen3-8b_megatron.sh): config-group choice: verl's megatron config
   968 verl keys: 22 set by you and migrated (16 mapped, 6 with no effect here), 0 refused, 946 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    1024    1024  data.train_batch_size 1024 x rollout.n 1
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                       256     256  256 prompts x n 1
   data_parallel_size                     2       2  GPUs / model-parallel size
   minibatch_size_per_rank              128     128  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                16      16  per rank / micro-batch 8 (dynamic in verl)
   grad_accumulation_steps               16      16  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl uses a fixed number of samples (engines.train.micro_batch_size), which changes memory use, not the math
   schedule.total_steps = 15 epochs x (7473 rows // 1024 prompts) = 105 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (16): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 2 -> engines.train.options.pipeline_parallel
 * actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 2 -> engines.train.options.tensor_parallel
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 24576 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_dynamic_bsz = true -> engines.train.micro_batch_size
 * actor_rollout_ref.model.path = 'Qwen/Qwen3-8B' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * critic.model.path = 'Qwen/Qwen3-8B' -> critic.path
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
 * data.train_files = ['/data/data/gsm8k/train.parquet', '/data/data/math/train... -> data.train
 * data.val_files = ['/data/data/gsm8k/test.parquet', '/data/data/math/test.p... -> data.val
 * trainer.experiment_name = 'run' -> run.name
 * trainer.project_name = 'verl_ppo_gsm8k_math' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (6): why
 * critic.megatron.pipeline_model_parallel_size = 2: same as the actor's layout (one [engines.train.options])
 * critic.megatron.tensor_model_parallel_size = 2: same as the actor's layout (one [engines.train.options])
 * critic.ppo_max_token_len_per_gpu = 24576: token budget of dynamic batching (memory)
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 2048: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * ray_kwargs.ray_init.runtime_env.py_executable = 'uv -v run --frozen --all-packages --extra vllm --extra m...: Ray start-up

at verl's default (946):
    876 no effect in rlctl
     67 mapped to the recipe
      3 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-main/rloo_qwen3-8b_fsdp.sh': """\
verl config tests/cli/migrate_fixtures/verl-main/_generated_ppo_trainer.yaml + 42 overrides (42 from rloo_qwen3-8b_fsdp.sh)
   launch script tests/cli/migrate_fixtures/verl-main/rloo_qwen3-8b_fsdp.sh: main_ppo call at line 114
   the script's defaults used (--var NAME=VALUE changes one): ACTOR_LR=1e-6, ENTROPY_COEFF=0, MAX_PROMPT_LENGTH=1024, MAX_RESPONSE_LENGTH=2048, MODEL_PATH=Qwen/Qwen3-8B, NGPUS_PER_NODE=8, NNODES=1, PPO_MAX_TOKEN_LEN_PER_GPU=24576, PPO_MINI_BATCH_SIZE=256, PROJECT_NAME=verl_rloo_gsm8k_math, ROLLOUT_GPU_MEM_UTIL=0.6, ROLLOUT_N=5, ROLLOUT_TP=2, SAVE_FREQ=20, TEST_FREQ=5, TOTAL_EPOCHS=15, TRAIN_BATCH_SIZE=1024
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: the YAML is verl main@1dda039b's generated fsdp config
   914 verl keys: 20 set by you and migrated (16 mapped, 4 with no effect here), 0 refused, 894 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    5120    5120  data.train_batch_size 1024 x rollout.n 5
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                      1280    1280  256 prompts x n 5
   data_parallel_size                     8       8  GPUs / model-parallel size
   minibatch_size_per_rank              160     160  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                20      20  per rank / micro-batch 8 (dynamic in verl)
   grad_accumulation_steps               20      20  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl uses a fixed number of samples (engines.train.micro_batch_size), which changes memory use, not the math
   schedule.total_steps = 15 epochs x (7473 rows // 1024 prompts) = 105 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (16): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 24576 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_dynamic_bsz = true -> engines.train.micro_batch_size
 * actor_rollout_ref.model.path = 'Qwen/Qwen3-8B' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.n = 5 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * algorithm.adv_estimator = 'rloo' -> algorithm.estimator
 * algorithm.use_kl_in_reward = true -> algorithm.kl.in
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
 * data.train_files = ['/data/data/gsm8k/train.parquet', '/data/data/math/train... -> data.train
 * data.val_files = ['/data/data/gsm8k/test.parquet', '/data/data/math/test.p... -> data.val
 * trainer.experiment_name = 'run' -> run.name
 * trainer.project_name = 'verl_rloo_gsm8k_math' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (4): why
 * actor_rollout_ref.ref.fsdp_config.param_offload = true: rlctl uses the actor's engine options (one [engines.train.options]) (False) here
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 2048: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * ray_kwargs.ray_init.runtime_env.py_executable = 'uv -v run --frozen --all-packages --extra vllm --extra f...: Ray start-up

at verl's default (894):
    829 no effect in rlctl
     64 mapped to the recipe
      1 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-v0.7.1/grpo_qwen2-7b_fsdp.sh': """\
verl config tests/cli/migrate_fixtures/verl-v0.7.1/_generated_ppo_trainer.yaml + 37 overrides (37 from grpo_qwen2-7b_fsdp.sh)
   launch script tests/cli/migrate_fixtures/verl-v0.7.1/grpo_qwen2-7b_fsdp.sh: main_ppo call at line 5
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: the YAML is verl v0.7.1's generated fsdp config
   621 verl keys: 19 set by you and migrated (15 mapped, 4 with no effect here), 0 refused, 602 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    5120    5120  data.train_batch_size 1024 x rollout.n 5
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                      1280    1280  256 prompts x n 5
   data_parallel_size                     8       8  GPUs / model-parallel size
   minibatch_size_per_rank              160     160  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                 4       4  per rank / micro-batch 40
   grad_accumulation_steps                4       4  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   schedule.total_steps = 15 epochs x (7473 rows // 1024 prompts) = 105 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (15): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 40 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_kl_loss = true -> algorithm.kl.in
 * actor_rollout_ref.model.path = 'Qwen/Qwen2-7B-Instruct' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 40 -> engines.train.log_prob_micro_batch_size
 * actor_rollout_ref.rollout.n = 5 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
 * data.train_files = '/data/data/gsm8k/train.parquet' -> data.train
 * data.val_files = '/data/data/gsm8k/test.parquet' -> data.val
 * trainer.experiment_name = 'qwen2_7b_function_rm' -> run.name
 * trainer.project_name = 'verl_grpo_example_gsm8k' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (4): why
 * actor_rollout_ref.ref.fsdp_config.param_offload = true: rlctl uses the actor's engine options (one [engines.train.options]) (False) here
 * actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 40: same as the rollout's log-prob micro-batch (rlctl has one)
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 1024: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)

at verl's default (602):
    537 no effect in rlctl
     64 mapped to the recipe
      1 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-v0.7.1/ppo_moe_qwen1.5_megatron.sh': """\
verl config tests/cli/migrate_fixtures/verl-v0.7.1/_generated_ppo_trainer.yaml + 45 overrides (45 from ppo_moe_qwen1.5_megatron.sh)
   launch script tests/cli/migrate_fixtures/verl-v0.7.1/ppo_moe_qwen1.5_megatron.sh: main_ppo call at line 28
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: --config-name ppo_megatron_trainer: verl v0.7.1's generated megatron config (shipped with rlctl), as verl composes it
   649 verl keys: 28 set by you and migrated (18 mapped, 10 with no effect here), 0 refused, 621 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    1024    1024  data.train_batch_size 1024 x rollout.n 1
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                       256     256  256 prompts x n 1
   data_parallel_size                     4       4  GPUs / model-parallel size
   minibatch_size_per_rank               64      64  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                16      16  per rank / micro-batch 4
   grad_accumulation_steps               16      16  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   schedule.total_steps = 100 epochs x (7473 rows // 1024 prompts) = 700 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (18): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 2 -> engines.train.options.pipeline_parallel
 * actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 4 -> engines.train.options.tensor_parallel
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4 -> engines.train.micro_batch_size
 * actor_rollout_ref.model.path = '/data/models/Qwen/Qwen1.5-MoE-A2.7B-Chat' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.7 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 2 -> engines.train.log_prob_micro_batch_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * actor_rollout_ref.rollout.tensor_model_parallel_size = 4 -> engines.rollout.replicas
 * critic.model.path = '/data/models/Qwen/Qwen1.5-MoE-A2.7B-Chat' -> critic.path
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
 * data.train_files = '/data/data/gsm8k/train.parquet' -> data.train
 * data.val_files = '/data/data/gsm8k/test.parquet' -> data.val
 * trainer.experiment_name = 'qwen1.5_moe_nochat' -> run.name
 * trainer.nnodes = 4 -> resources.nodes
 * trainer.project_name = 'verl_megatron_gsm8k_examples' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 100 -> schedule.total_steps

set by you, no effect here (10): why
 * actor_rollout_ref.actor.megatron.dist_checkpointing_path = '/data/mcore_ckpt/Qwen1.5-MoE-A2.7B-Chat': see use_dist_checkpointing
 * actor_rollout_ref.actor.megatron.use_dist_checkpointing = true: True: rlctl loads the HF weights at model.path (make sure the dist checkpoint holds the same weights); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.ref.megatron.dist_checkpointing_path = '/data/mcore_ckpt/Qwen1.5-MoE-A2.7B-Chat': see use_dist_checkpointing
 * actor_rollout_ref.ref.megatron.use_dist_checkpointing = true: True: rlctl loads the HF weights at model.path (make sure the dist checkpoint holds the same weights); rlctl lacks it (no effect on the math)
 * critic.megatron.dist_checkpointing_path = '/data/mcore_ckpt/Qwen1.5-MoE-A2.7B-Chat': see use_dist_checkpointing
 * critic.megatron.pipeline_model_parallel_size = 2: same as the actor's layout (one [engines.train.options])
 * critic.megatron.tensor_model_parallel_size = 4: same as the actor's layout (one [engines.train.options])
 * critic.megatron.use_dist_checkpointing = true: True: rlctl loads the HF weights at model.path (make sure the dist checkpoint holds the same weights); rlctl lacks it (no effect on the math)
 * critic.ppo_micro_batch_size_per_gpu = 4: same as the actor's micro-batch size (engines.train.micro_batch_size)
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)

at verl's default (621):
    553 no effect in rlctl
     65 mapped to the recipe
      3 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-v0.7.1/rloo_qwen2-7b_fsdp.sh': """\
verl config tests/cli/migrate_fixtures/verl-v0.7.1/_generated_ppo_trainer.yaml + 36 overrides (36 from rloo_qwen2-7b_fsdp.sh)
   launch script tests/cli/migrate_fixtures/verl-v0.7.1/rloo_qwen2-7b_fsdp.sh: main_ppo call at line 5
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: the YAML is verl v0.7.1's generated fsdp config
   621 verl keys: 18 set by you and migrated (14 mapped, 4 with no effect here), 0 refused, 603 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    5120    5120  data.train_batch_size 1024 x rollout.n 5
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                      1280    1280  256 prompts x n 5
   data_parallel_size                     8       8  GPUs / model-parallel size
   minibatch_size_per_rank              160     160  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                 2       2  per rank / micro-batch 80
   grad_accumulation_steps                2       2  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   schedule.total_steps = 15 epochs x (7473 rows // 1024 prompts) = 105 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (14): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 80 -> engines.train.micro_batch_size
 * actor_rollout_ref.model.path = 'Qwen/Qwen2-7B-Instruct' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 160 -> engines.train.log_prob_micro_batch_size
 * actor_rollout_ref.rollout.n = 5 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * algorithm.adv_estimator = 'rloo' -> algorithm.estimator
 * algorithm.use_kl_in_reward = true -> algorithm.kl.in
 * data.train_files = '/data/data/gsm8k/train.parquet' -> data.train
 * data.val_files = '/data/data/gsm8k/test.parquet' -> data.val
 * trainer.experiment_name = 'qwen2_7b_function_rm' -> run.name
 * trainer.project_name = 'verl_rloo_example_gsm8k' -> logging.sink_options
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (4): why
 * actor_rollout_ref.ref.fsdp_config.param_offload = true: rlctl uses the actor's engine options (one [engines.train.options]) (False) here
 * actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 160: same as the rollout's log-prob micro-batch (rlctl has one)
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 1024: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)

at verl's default (603):
    536 no effect in rlctl
     66 mapped to the recipe
      1 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-v0.8.0/ppo_qwen3-8b_megatron.sh': """\
verl config tests/cli/migrate_fixtures/verl-v0.8.0/_generated_ppo_trainer.yaml + 45 overrides (45 from ppo_qwen3-8b_megatron.sh)
   launch script tests/cli/migrate_fixtures/verl-v0.8.0/ppo_qwen3-8b_megatron.sh: main_ppo call at line 122
   the script's defaults used (--var NAME=VALUE changes one): ACTOR_LR=1e-6, ACTOR_PP=2, ACTOR_TP=2, CRITIC_LR=1e-5, CRITIC_MODEL_PATH=Qwen/Qwen3-8B, CRITIC_PP=2, CRITIC_TP=2, ENTROPY_COEFF=0, GSM8K_TEST_FILE=/data/data/gsm8k/test.parquet, GSM8K_TRAIN_FILE=/data/data/gsm8k/train.parquet, MATH_TEST_FILE=/data/data/math/test.parquet, MATH_TRAIN_FILE=/data/data/math/train.parquet, MAX_PROMPT_LENGTH=1024, MAX_RESPONSE_LENGTH=2048, MODEL_PATH=Qwen/Qwen3-8B, NGPUS_PER_NODE=8, NNODES=1, PPO_MAX_TOKEN_LEN_PER_GPU=24576, PPO_MINI_BATCH_SIZE=256, PROJECT_NAME=verl_ppo_gsm8k_math, ROLLOUT_GPU_MEM_UTIL=0.6, ROLLOUT_N=1, ROLLOUT_TP=2, SAVE_FREQ=20, TEST_FREQ=5, TOTAL_EPOCHS=15, TRAIN_BATCH_SIZE=1024
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: model_engine=megatron: verl v0.8.0's generated megatron config (shipped with rlctl), as verl composes it
   model_engine=megatron (ppo_qwen3-8b_megatron.sh): config-group choice: verl's megatron config
   836 verl keys: 21 set by you and migrated (16 mapped, 5 with no effect here), 0 refused, 815 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    1024    1024  data.train_batch_size 1024 x rollout.n 1
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                       256     256  256 prompts x n 1
   data_parallel_size                     2       2  GPUs / model-parallel size
   minibatch_size_per_rank              128     128  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                16      16  per rank / micro-batch 8 (dynamic in verl)
   grad_accumulation_steps               16      16  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl uses a fixed number of samples (engines.train.micro_batch_size), which changes memory use, not the math
   schedule.total_steps = 15 epochs x (7473 rows // 1024 prompts) = 105 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (16): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 2 -> engines.train.options.pipeline_parallel
 * actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 2 -> engines.train.options.tensor_parallel
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 24576 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_dynamic_bsz = true -> engines.train.micro_batch_size
 * actor_rollout_ref.model.path = 'Qwen/Qwen3-8B' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * critic.model.path = 'Qwen/Qwen3-8B' -> critic.path
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
 * data.train_files = ['/data/data/gsm8k/train.parquet', '/data/data/math/train... -> data.train
 * data.val_files = ['/data/data/gsm8k/test.parquet', '/data/data/math/test.p... -> data.val
 * trainer.experiment_name = 'run' -> run.name
 * trainer.project_name = 'verl_ppo_gsm8k_math' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (5): why
 * critic.megatron.pipeline_model_parallel_size = 2: same as the actor's layout (one [engines.train.options])
 * critic.megatron.tensor_model_parallel_size = 2: same as the actor's layout (one [engines.train.options])
 * critic.ppo_max_token_len_per_gpu = 24576: token budget of dynamic batching (memory)
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 2048: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)

at verl's default (815):
    746 no effect in rlctl
     66 mapped to the recipe
      3 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-v0.8.0/rloo_qwen3-8b_fsdp.sh': """\
verl config tests/cli/migrate_fixtures/verl-v0.8.0/_generated_ppo_trainer.yaml + 41 overrides (41 from rloo_qwen3-8b_fsdp.sh)
   launch script tests/cli/migrate_fixtures/verl-v0.8.0/rloo_qwen3-8b_fsdp.sh: main_ppo call at line 105
   the script's defaults used (--var NAME=VALUE changes one): ACTOR_LR=1e-6, ENTROPY_COEFF=0, MAX_PROMPT_LENGTH=1024, MAX_RESPONSE_LENGTH=2048, MODEL_PATH=Qwen/Qwen3-8B, NGPUS_PER_NODE=8, NNODES=1, PPO_MAX_TOKEN_LEN_PER_GPU=24576, PPO_MINI_BATCH_SIZE=256, PROJECT_NAME=verl_rloo_gsm8k_math, ROLLOUT_GPU_MEM_UTIL=0.6, ROLLOUT_N=5, ROLLOUT_TP=2, SAVE_FREQ=20, TEST_FREQ=5, TOTAL_EPOCHS=15, TRAIN_BATCH_SIZE=1024
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: the YAML is verl v0.8.0's generated fsdp config
   786 verl keys: 19 set by you and migrated (16 mapped, 3 with no effect here), 0 refused, 767 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    5120    5120  data.train_batch_size 1024 x rollout.n 5
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                      1280    1280  256 prompts x n 5
   data_parallel_size                     8       8  GPUs / model-parallel size
   minibatch_size_per_rank              160     160  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                20      20  per rank / micro-batch 8 (dynamic in verl)
   grad_accumulation_steps               20      20  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl uses a fixed number of samples (engines.train.micro_batch_size), which changes memory use, not the math
   schedule.total_steps = 15 epochs x (7473 rows // 1024 prompts) = 105 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (16): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 24576 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_dynamic_bsz = true -> engines.train.micro_batch_size
 * actor_rollout_ref.model.path = 'Qwen/Qwen3-8B' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.n = 5 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * algorithm.adv_estimator = 'rloo' -> algorithm.estimator
 * algorithm.use_kl_in_reward = true -> algorithm.kl.in
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
 * data.train_files = ['/data/data/gsm8k/train.parquet', '/data/data/math/train... -> data.train
 * data.val_files = ['/data/data/gsm8k/test.parquet', '/data/data/math/test.p... -> data.val
 * trainer.experiment_name = 'run' -> run.name
 * trainer.project_name = 'verl_rloo_gsm8k_math' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (3): why
 * actor_rollout_ref.ref.fsdp_config.param_offload = true: rlctl uses the actor's engine options (one [engines.train.options]) (False) here
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 2048: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)

at verl's default (767):
    703 no effect in rlctl
     63 mapped to the recipe
      1 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-v0.9.0/grpo_moe_moonlight-16b_megatron.sh': """\
verl config tests/cli/migrate_fixtures/verl-v0.9.0/_generated_ppo_trainer.yaml + 47 overrides (47 from grpo_moe_moonlight-16b_megatron.sh)
   launch script tests/cli/migrate_fixtures/verl-v0.9.0/grpo_moe_moonlight-16b_megatron.sh: main_ppo call at line 110
   the script's defaults used (--var NAME=VALUE changes one): ACTOR_EP=4, ACTOR_ETP=1, ACTOR_LR=1e-6, ACTOR_PP=3, ACTOR_TP=4, ENTROPY_COEFF=0, HF_MODEL_PATH=moonshotai/Moonlight-16B-A3B, KL_LOSS_COEF=0.001, LOG_PROB_MICRO_BATCH_SIZE_PER_GPU=16, MAX_PROMPT_LENGTH=1024, MAX_RESPONSE_LENGTH=2048, NGPUS_PER_NODE=8, NNODES=3, PPO_MICRO_BATCH_SIZE_PER_GPU=16, PPO_MINI_BATCH_SIZE=64, PROJECT_NAME=verl_grpo_example_gsm8k_math, ROLLOUT_GPU_MEM_UTIL=0.6, ROLLOUT_N=5, ROLLOUT_TP=4, SAVE_FREQ=20, TEST_FILE=/data/data/gsm8k/test.parquet, TEST_FREQ=5, TOTAL_EPOCHS=15, TRAIN_BATCH_SIZE=192, TRAIN_FILE=/data/data/gsm8k/train.parquet
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: model_engine=megatron: verl v0.9.0's generated megatron config (shipped with rlctl), as verl composes it
   model_engine=megatron (grpo_moe_moonlight-16b_megatron.sh): config-group choice: verl's megatron config
   941 verl keys: 33 set by you and migrated (23 mapped, 10 with no effect here), 0 refused, 908 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                     960     960  data.train_batch_size 192 x rollout.n 5
   prompts_per_minibatch                 64      64  actor.ppo_mini_batch_size (prompts)
   minibatch_size                       320     320  64 prompts x n 5
   data_parallel_size                     2       2  GPUs / model-parallel size
   minibatch_size_per_rank              160     160  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                10      10  per rank / micro-batch 16
   grad_accumulation_steps               10      10  = micro-batches per rank
   optimizer_steps_per_train_step         3       3  3 minibatches x 1 epochs

notes:
   schedule.total_steps = 15 epochs x (7473 rows // 192 prompts) = 570 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (23): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 3 -> engines.train.options.pipeline_parallel
 * actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 4 -> engines.train.options.tensor_parallel
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 16 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.ppo_mini_batch_size = 64 -> algorithm.minibatches
 * actor_rollout_ref.actor.use_kl_loss = true -> algorithm.kl.in
 * actor_rollout_ref.model.path = 'moonshotai/Moonlight-16B-A3B' -> model.path
 * actor_rollout_ref.model.trust_remote_code = true -> model.trust_remote_code
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 16 -> engines.train.log_prob_micro_batch_size
 * actor_rollout_ref.rollout.n = 5 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * actor_rollout_ref.rollout.tensor_model_parallel_size = 4 -> engines.rollout.replicas
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
 * data.train_batch_size = 192 -> algorithm.prompts_per_step
 * data.train_files = '/data/data/gsm8k/train.parquet' -> data.train
 * data.val_files = '/data/data/gsm8k/test.parquet' -> data.val
 * trainer.experiment_name = 'run' -> run.name
 * trainer.nnodes = 3 -> resources.nodes
 * trainer.project_name = 'verl_grpo_example_gsm8k_math' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (10): why
 * actor_rollout_ref.actor.megatron.dist_checkpointing_path = '/ckpt': see use_dist_checkpointing
 * actor_rollout_ref.actor.megatron.expert_model_parallel_size = 4: 4: rlctl's megatron engine supports only 1 (a parallel layout: the math is the same with more data parallelism)
 * actor_rollout_ref.actor.megatron.expert_tensor_parallel_size = 1: unset
 * actor_rollout_ref.actor.megatron.use_dist_checkpointing = true: True: rlctl loads the HF weights at model.path (make sure the dist checkpoint holds the same weights); rlctl lacks it (no effect on the math)
 * actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 16: same as the rollout's log-prob micro-batch (rlctl has one)
 * actor_rollout_ref.ref.megatron.dist_checkpointing_path = '/ckpt': see use_dist_checkpointing
 * actor_rollout_ref.ref.megatron.use_dist_checkpointing = true: True: rlctl loads the HF weights at model.path (make sure the dist checkpoint holds the same weights); rlctl lacks it (no effect on the math)
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 2048: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * data.trust_remote_code = true: the model's setting

at verl's default (908):
    848 no effect in rlctl
     57 mapped to the recipe
      3 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'verl-v0.9.0/grpo_qwen3-4b_fsdp.sh': """\
verl config tests/cli/migrate_fixtures/verl-v0.9.0/_generated_ppo_trainer.yaml + 47 overrides (47 from grpo_qwen3-4b_fsdp.sh)
   launch script tests/cli/migrate_fixtures/verl-v0.9.0/grpo_qwen3-4b_fsdp.sh: main_ppo call at line 130
   the script's defaults used (--var NAME=VALUE changes one): ACTOR_LR=1e-6, ENTROPY_COEFF=0, INFER_BACKEND=vllm, KL_LOSS_COEF=0.001, LOG_PROB_MICRO_BATCH_SIZE_PER_GPU=2, MAX_PROMPT_LENGTH=1024, MAX_RESPONSE_LENGTH=1024, MODEL_PATH=Qwen/Qwen3-4B, NGPUS_PER_NODE=8, NNODES=1, PPO_MICRO_BATCH_SIZE_PER_GPU=2, PPO_MINI_BATCH_SIZE=256, PROJECT_NAME=verl_grpo_example_geo3k, ROLLOUT_GPU_MEM_UTIL=0.6, ROLLOUT_N=5, ROLLOUT_TP=2, SAVE_FREQ=20, TEST_FILE=/data/data/gsm8k/test.parquet, TEST_FREQ=5, TOTAL_EPOCHS=15, TRAIN_BATCH_SIZE=512, TRAIN_FILE=/data/data/gsm8k/train.parquet
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: the YAML is verl v0.9.0's generated fsdp config
   854 verl keys: 27 set by you and migrated (19 mapped, 8 with no effect here), 0 refused, 827 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    2560    2560  data.train_batch_size 512 x rollout.n 5
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                      1280    1280  256 prompts x n 5
   data_parallel_size                     8       8  GPUs / model-parallel size
   minibatch_size_per_rank              160     160  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                80      80  per rank / micro-batch 2 (dynamic in verl)
   grad_accumulation_steps               80      80  = micro-batches per rank
   optimizer_steps_per_train_step         2       2  2 minibatches x 1 epochs

notes:
   actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl uses a fixed number of samples (engines.train.micro_batch_size), which changes memory use, not the math
   schedule.total_steps = 15 epochs x (7473 rows // 512 prompts) = 210 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (19): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.ppo_max_token_len_per_gpu = 3000 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 2 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_dynamic_bsz = true -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_kl_loss = true -> algorithm.kl.in
 * actor_rollout_ref.model.path = 'Qwen/Qwen3-4B' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 2 -> engines.train.log_prob_micro_batch_size
 * actor_rollout_ref.rollout.n = 5 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
 * data.train_batch_size = 512 -> algorithm.prompts_per_step
 * data.train_files = '/data/data/gsm8k/train.parquet' -> data.train
 * data.val_files = '/data/data/gsm8k/test.parquet' -> data.val
 * trainer.experiment_name = 'run' -> run.name
 * trainer.project_name = 'verl_grpo_example_geo3k' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (8): why
 * actor_rollout_ref.ref.fsdp_config.param_offload = true: rlctl uses the actor's engine options (one [engines.train.options]) (False) here
 * actor_rollout_ref.ref.log_prob_max_token_len_per_gpu = 8192: token budget of dynamic batching (memory)
 * actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 2: same as the rollout's log-prob micro-batch (rlctl has one)
 * actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes = 4096: weight-sync transport
 * actor_rollout_ref.rollout.enable_chunked_prefill = false: server batching (speed)
 * actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu = 4096: token budget of dynamic batching (memory)
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 1024: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)

at verl's default (827):
    764 no effect in rlctl
     62 mapped to the recipe
      1 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
"""})
