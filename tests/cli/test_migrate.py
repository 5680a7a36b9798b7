"""``rlctl config migrate`` on verl's own generated configs and example launch scripts.

Fixtures (tests/cli/migrate_fixtures/verl-b178a3cd) are verl's published files at a main-branch
commit after v0.7.0 (the last layout with ``reward_model.*``): the two generated trainer
configs and five example scripts (GRPO FSDP, GRPO Megatron, PPO with a critic, a MoE PPO on
Megatron, and a DAPO MoE run refused for what rlctl lacks; test_migrate_dapo.py migrates
it once those are removed, with verl's filter_groups and reward model). The releases since
(v0.7.1 to main) are in test_migrate_releases.py.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from inline_snapshot import snapshot

FIX = Path("tests/cli/migrate_fixtures/verl-b178a3cd")
FSDP, MEGATRON = str(FIX / "ppo_trainer.yaml"), str(FIX / "ppo_megatron_trainer.yaml")
CASES = {
    "grpo_fsdp": (FSDP, "grpo_fsdp_qwen2-7b.sh"),
    "grpo_megatron": (MEGATRON, "grpo_megatron_qwen2-7b_math.sh"),
    "ppo_critic": (FSDP, "ppo_critic_deepseek7b.sh"),
    "ppo_moe": (MEGATRON, "ppo_moe_qwen1.5_megatron.sh"),
}
COMMON = ["--var", "HOME=/data", "--reward", "gsm8k", "--train-rows", "7473"]


def _migrate(rlctl, tmp_path: Path, case: str, *extra: str, code: int = 0):  # type: ignore[no-untyped-def]
    yaml, script = CASES[case]
    out = tmp_path / f"{case}.toml"
    result = rlctl("config", "migrate", yaml, "--verl-script", str(FIX / script), *COMMON,
                   "-o", str(out), *extra, code=code)
    return result, out


def _clean(text: str, tmp_path: Path) -> str:
    return text.replace(str(tmp_path), "<tmp>")


@pytest.mark.parametrize("case", list(CASES))
def test_fixture_migrates_to_a_recipe_that_validates(rlctl, tmp_path: Path, case: str) -> None:  # type: ignore[no-untyped-def]
    result, out = _migrate(rlctl, tmp_path, case, "--report", str(tmp_path / "report.txt"))
    assert _clean(result.stdout, tmp_path) == snapshot({'grpo_fsdp': """\
verl config tests/cli/migrate_fixtures/verl-b178a3cd/ppo_trainer.yaml + 37 overrides (37 from grpo_fsdp_qwen2-7b.sh)
   launch script tests/cli/migrate_fixtures/verl-b178a3cd/grpo_fsdp_qwen2-7b.sh: main_ppo call at line 5
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: the YAML is verl's generated fsdp config from a commit rlctl has no defaults for (closest: v0.7.0, 38 leaves differ); its values are taken as verl's defaults
   591 verl keys: 19 set by you and migrated (15 mapped, 4 with no effect here), 0 refused, 572 at verl's default

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

at verl's default (572):
    507 no effect in rlctl
     64 mapped to the recipe
      1 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'grpo_megatron': """\
verl config tests/cli/migrate_fixtures/verl-b178a3cd/ppo_megatron_trainer.yaml + 39 overrides (39 from grpo_megatron_qwen2-7b_math.sh)
   launch script tests/cli/migrate_fixtures/verl-b178a3cd/grpo_megatron_qwen2-7b_math.sh: main_ppo call at line 20
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: the YAML is verl's generated megatron config from a commit rlctl has no defaults for (closest: v0.7.0, 37 leaves differ); its values are taken as verl's defaults
   651 verl keys: 22 set by you and migrated (18 mapped, 4 with no effect here), 0 refused, 629 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    5120    5120  data.train_batch_size 1024 x rollout.n 5
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                      1280    1280  256 prompts x n 5
   data_parallel_size                     2       2  GPUs / model-parallel size
   minibatch_size_per_rank              640     640  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank               160     160  per rank / micro-batch 4
   grad_accumulation_steps              160     160  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   schedule.total_steps = 15 epochs x (7473 rows // 1024 prompts) = 105 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (18): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 2 -> engines.train.options.pipeline_parallel
 * actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 2 -> engines.train.options.tensor_parallel
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_kl_loss = true -> algorithm.kl.in
 * actor_rollout_ref.model.path = 'Qwen/Qwen2-7B-Instruct' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 4 -> engines.train.log_prob_micro_batch_size
 * actor_rollout_ref.rollout.n = 5 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
 * data.train_files = ['/data/data/gsm8k/train.parquet', '/data/data/math/train... -> data.train
 * data.val_files = ['/data/data/gsm8k/test.parquet', '/data/data/math/test.p... -> data.val
 * trainer.experiment_name = 'qwen2_7b_megatron' -> run.name
 * trainer.project_name = 'verl_grpo_example_gsm8k_math' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (4): why
 * actor_rollout_ref.model.use_fused_kernels = true: kernel choice
 * actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 4: same as the rollout's log-prob micro-batch (rlctl has one)
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 1024: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)

at verl's default (629):
    564 no effect in rlctl
     62 mapped to the recipe
      3 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'ppo_critic': """\
verl config tests/cli/migrate_fixtures/verl-b178a3cd/ppo_trainer.yaml + 39 overrides (39 from ppo_critic_deepseek7b.sh)
   launch script tests/cli/migrate_fixtures/verl-b178a3cd/ppo_critic_deepseek7b.sh: main_ppo call at line 4
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: the YAML is verl's generated fsdp config from a commit rlctl has no defaults for (closest: v0.7.0, 38 leaves differ); its values are taken as verl's defaults
   591 verl keys: 17 set by you and migrated (14 mapped, 3 with no effect here), 0 refused, 574 at verl's default

batch (verl's numbers; `rlctl config show` derives the same):
                                       verl   rlctl
   samples_per_step                    1024    1024  data.train_batch_size 1024 x rollout.n 1
   prompts_per_minibatch                256     256  actor.ppo_mini_batch_size (prompts)
   minibatch_size                       256     256  256 prompts x n 1
   data_parallel_size                     8       8  GPUs / model-parallel size
   minibatch_size_per_rank               32      32  verl's normalised ppo_mini_batch_size
   micro_batches_per_rank                 2       2  per rank / micro-batch 16
   grad_accumulation_steps                2       2  = micro-batches per rank
   optimizer_steps_per_train_step         4       4  4 minibatches x 1 epochs

notes:
   schedule.total_steps = 15 epochs x (7473 rows // 1024 prompts) = 105 (before verl's over-long prompt filter, if any)
   trainer.logger "wandb": left out because wandb is not installed; `pip install wandb`, then add "wandb" to logging.sinks

set by you and mapped (14): verl key = value -> rlctl key (*: set by an override; y: in your YAML, not verl's default)
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 16 -> engines.train.micro_batch_size
 * actor_rollout_ref.model.path = 'deepseek-ai/deepseek-llm-7b-chat' -> model.path
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.4 -> engines.rollout.options.gpu_memory_utilization
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 32 -> engines.train.log_prob_micro_batch_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * actor_rollout_ref.rollout.tensor_model_parallel_size = 4 -> engines.rollout.replicas
 * critic.model.path = 'deepseek-ai/deepseek-llm-7b-chat' -> critic.path
 * data.train_files = '/data/data/gsm8k/train.parquet' -> data.train
 * data.val_files = '/data/data/gsm8k/test.parquet' -> data.val
 * trainer.experiment_name = 'deepseek_llm_7b_function_rm' -> run.name
 * trainer.project_name = 'verl_example_gsm8k' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 1 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

set by you, no effect here (3): why
 * critic.model.use_remove_padding = true: rlctl packs sequences its own way (no math effect)
 * critic.ppo_micro_batch_size_per_gpu = 32: rlctl uses the actor's micro-batch size (engines.train.micro_batch_size) (16) here
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)

at verl's default (574):
    505 no effect in rlctl
     68 mapped to the recipe
      1 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
""", 'ppo_moe': """\
verl config tests/cli/migrate_fixtures/verl-b178a3cd/ppo_megatron_trainer.yaml + 45 overrides (45 from ppo_moe_qwen1.5_megatron.sh)
   launch script tests/cli/migrate_fixtures/verl-b178a3cd/ppo_moe_qwen1.5_megatron.sh: main_ppo call at line 28
   the call forwards "$@": give extra overrides as arguments
   verl's defaults: the YAML is verl's generated megatron config from a commit rlctl has no defaults for (closest: v0.7.0, 37 leaves differ); its values are taken as verl's defaults
   651 verl keys: 28 set by you and migrated (18 mapped, 10 with no effect here), 0 refused, 623 at verl's default

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

at verl's default (623):
    555 no effect in rlctl
     65 mapped to the recipe
      3 unsupported, no effect on the math
   (--verbose, or the --report file, lists each)
"""})[case]
    assert _clean(out.read_text(), tmp_path) == snapshot({'grpo_fsdp': """\
# qwen2_7b_function_rm: migrated from verl by `rlctl config migrate`.
#
# verl run:  grpo on Qwen/Qwen2-7B-Instruct, fsdp training + vllm rollout on 8 GPUs
# Made by:   rlctl config migrate tests/cli/migrate_fixtures/verl-b178a3cd/ppo_trainer.yaml --verl-script tests/cli/migrate_fixtures/verl-b178a3cd/grpo_fsdp_qwen2-7b.sh --var HOME=/data --reward gsm8k --train-rows 7473 -o <tmp>/grpo_fsdp.toml
# After each value: the verl key it came from (actor., rollout., ref., model. are under
# actor_rollout_ref). The migration report accounts for every verl key: mapped, dropped
# (no effect here) or unsupported, and why.
#
# Run:       rlctl train <tmp>/grpo_fsdp.toml
# Check:     rlctl config validate <tmp>/grpo_fsdp.toml
# Inspect:   rlctl config show <tmp>/grpo_fsdp.toml   (derived batch numbers = verl's)

[run]
device = "cuda"                         # trainer.device
name = "qwen2_7b_function_rm"           # trainer.experiment_name
seed = 42                               # actor.fsdp_config.seed (rlctl derives every seed from run.seed)

[model]
dtype = "float32"                       # actor.fsdp_config.model_dtype (parameters and master weights)
path = "Qwen/Qwen2-7B-Instruct"         # model.path
trust_remote_code = false               # model.trust_remote_code
gradient_checkpointing = true           # model.enable_gradient_checkpointing

[critic]
enabled = false                         # algorithm.adv_estimator = grpo (verl trains a critic for gae)

[data]
train = "/data/data/gsm8k/train.parquet" # data.train_files
val = "/data/data/gsm8k/test.parquet"   # data.val_files
prompt_key = "prompt"                   # data.prompt_key
max_prompt_tokens = 512                 # data.max_prompt_length
shuffle = true                          # data.shuffle

[algorithm]
estimator = "grpo"                      # algorithm.adv_estimator
gamma = 1.0                             # algorithm.gamma
lam = 1.0                               # algorithm.lam
norm_adv_by_std = true                  # algorithm.norm_adv_by_std_in_grpo
prompts_per_step = 1024                 # data.train_batch_size (prompts)
group_size = 5                          # rollout.n
minibatches = 4                         # train_batch_size / ppo_mini_batch_size = 1024 / 256 (prompts)
epochs = 1                              # actor.ppo_epochs
shuffle_minibatches = false             # actor.shuffle

[algorithm.loss]
policy_loss = "vanilla"                 # actor.policy_loss.loss_mode
clip_low = 0.2                          # actor.clip_ratio_low
clip_high = 0.2                         # actor.clip_ratio_high
clip_ratio_c = 3.0                      # actor.clip_ratio_c (dual clip)
agg = "token-mean"                      # actor.loss_agg_mode
entropy_coef = 0.0                      # actor.entropy_coeff

[algorithm.kl]
in = "loss"                             # actor.use_kl_loss
estimator = "k3"                        # actor.kl_loss_type
coef = 0.001                            # actor.kl_loss_coef

[algorithm.optim]
lr = 1e-06                              # actor.optim.lr
weight_decay = 0.01                     # actor.optim.weight_decay
betas = [0.9, 0.999]                    # actor.optim.betas
grad_clip = 1.0                         # actor.grad_clip
name = "adamw"                          # actor.optim.optimizer
min_lr_ratio = 0.0                      # actor.optim.min_lr_ratio
scheduler = "constant"                  # actor.optim.lr_scheduler_type
warmup_steps = 0                        # actor.optim.lr_warmup_steps

[rollout]
temperature = 1.0                       # rollout.temperature
top_k = 0                               # rollout.top_k (-1 = off)
top_p = 1.0                             # rollout.top_p
max_new_tokens = 1024                   # rollout.response_length
val_temperature = 0.0                   # val_kwargs.do_sample = false
val_group_size = 1                      # rollout.val_kwargs.n
agent_loop = "single_turn"              # rollout.agent.default_agent_loop

[[rewards]]
name = "gsm8k"                          # --reward

[engines.train]
backend = "fsdp"                        # actor.strategy
ranks = 8                               # trainer.nnodes x trainer.n_gpus_per_node
micro_batch_size = 40                   # actor.ppo_micro_batch_size_per_gpu (samples per rank)
log_prob_micro_batch_size = 40          # rollout.log_prob_micro_batch_size_per_gpu

[engines.train.options]
mixed_precision = "bf16"                # actor.fsdp_config.dtype (compute dtype)
cpu_offload = false                     # actor.fsdp_config.*_offload
reshard_after_forward = true            # actor.fsdp_config.reshard_after_forward

[engines.rollout]
backend = "vllm"                        # rollout.name
agent_workers = 4                       # rollout.agent.num_workers 8, each owning 1 of 4 servers
replicas = 4                            # 8 GPUs / rollout.tensor_model_parallel_size 2

[engines.rollout.options]
tensor_parallel_size = 2                # rollout.tensor_model_parallel_size
gpu_memory_utilization = 0.6            # rollout.gpu_memory_utilization
enforce_eager = false                   # rollout.enforce_eager
enable_prefix_caching = true            # rollout.enable_prefix_caching

[resources]
mode = "ray"                            # verl runs on Ray
nodes = 1                               # trainer.nnodes
devices_per_node = 8                    # trainer.n_gpus_per_node
placement = "colocate"                  # hybrid_engine (shared GPUs)

[schedule]
total_steps = 105                       # trainer.total_training_steps / total_epochs
eval_every = 5                          # trainer.test_freq (-1 = never)
save_every = 20                         # trainer.save_freq (-1 = only at the end)

[logging]
sinks = ["console", "jsonl"]            # trainer.logger (+ jsonl, which rlctl report reads)
""", 'grpo_megatron': """\
# qwen2_7b_megatron: migrated from verl by `rlctl config migrate`.
#
# verl run:  grpo on Qwen/Qwen2-7B-Instruct, megatron training + vllm rollout on 8 GPUs
# Made by:   rlctl config migrate tests/cli/migrate_fixtures/verl-b178a3cd/ppo_megatron_trainer.yaml --verl-script tests/cli/migrate_fixtures/verl-b178a3cd/grpo_megatron_qwen2-7b_math.sh --var HOME=/data --reward gsm8k --train-rows 7473 -o <tmp>/grpo_megatron.toml
# After each value: the verl key it came from (actor., rollout., ref., model. are under
# actor_rollout_ref). The migration report accounts for every verl key: mapped, dropped
# (no effect here) or unsupported, and why.
#
# Run:       rlctl train <tmp>/grpo_megatron.toml
# Check:     rlctl config validate <tmp>/grpo_megatron.toml
# Inspect:   rlctl config show <tmp>/grpo_megatron.toml   (derived batch numbers = verl's)

[run]
device = "cuda"                         # trainer.device
name = "qwen2_7b_megatron"              # trainer.experiment_name
seed = 42                               # actor.megatron.seed (rlctl derives every seed from run.seed)

[model]
dtype = "float32"                       # verl's megatron optimizer keeps fp32 master weights
path = "Qwen/Qwen2-7B-Instruct"         # model.path
trust_remote_code = false               # model.trust_remote_code
gradient_checkpointing = true           # model.enable_gradient_checkpointing

[critic]
enabled = false                         # algorithm.adv_estimator = grpo (verl trains a critic for gae)

[data]
train = ["/data/data/gsm8k/train.parquet", "/data/data/math/train.parquet"] # data.train_files
val = ["/data/data/gsm8k/test.parquet", "/data/data/math/test.parquet"] # data.val_files
prompt_key = "prompt"                   # data.prompt_key
max_prompt_tokens = 1024                # data.max_prompt_length
shuffle = true                          # data.shuffle

[algorithm]
estimator = "grpo"                      # algorithm.adv_estimator
gamma = 1.0                             # algorithm.gamma
lam = 1.0                               # algorithm.lam
norm_adv_by_std = true                  # algorithm.norm_adv_by_std_in_grpo
prompts_per_step = 1024                 # data.train_batch_size (prompts)
group_size = 5                          # rollout.n
minibatches = 4                         # train_batch_size / ppo_mini_batch_size = 1024 / 256 (prompts)
epochs = 1                              # actor.ppo_epochs
shuffle_minibatches = false             # actor.shuffle

[algorithm.loss]
policy_loss = "vanilla"                 # actor.policy_loss.loss_mode
clip_low = 0.2                          # actor.clip_ratio_low
clip_high = 0.2                         # actor.clip_ratio_high
clip_ratio_c = 3.0                      # actor.clip_ratio_c (dual clip)
agg = "token-mean"                      # actor.loss_agg_mode
entropy_coef = 0.0                      # actor.entropy_coeff

[algorithm.kl]
in = "loss"                             # actor.use_kl_loss
estimator = "k3"                        # actor.kl_loss_type
coef = 0.001                            # actor.kl_loss_coef

[algorithm.optim]
lr = 1e-06                              # actor.optim.lr
weight_decay = 0.01                     # actor.optim.weight_decay
betas = [0.9, 0.999]                    # actor.optim.betas
grad_clip = 1.0                         # actor.optim.clip_grad
name = "adamw"                          # actor.optim.optimizer
min_lr_ratio = 0.0                      # actor.optim.min_lr
scheduler = "constant"                  # actor.optim.lr_decay_style
warmup_steps = 0                        # actor.optim.lr_warmup_steps

[rollout]
temperature = 1.0                       # rollout.temperature
top_k = 0                               # rollout.top_k (-1 = off)
top_p = 1.0                             # rollout.top_p
max_new_tokens = 1024                   # rollout.response_length
val_temperature = 0.0                   # val_kwargs.do_sample = false
val_group_size = 1                      # rollout.val_kwargs.n
agent_loop = "single_turn"              # rollout.agent.default_agent_loop

[[rewards]]
name = "gsm8k"                          # --reward

[engines.train]
backend = "megatron"                    # actor.strategy
ranks = 8                               # trainer.nnodes x trainer.n_gpus_per_node
micro_batch_size = 4                    # actor.ppo_micro_batch_size_per_gpu (samples per rank)
log_prob_micro_batch_size = 4           # rollout.log_prob_micro_batch_size_per_gpu

[engines.train.options]
tensor_parallel = 2                     # actor.megatron.tensor_model_parallel_size
pipeline_parallel = 2                   # actor.megatron.pipeline_model_parallel_size
sequence_parallel = true                # actor.megatron.sequence_parallel (needs TP > 1)
transformer_impl = "transformer_engine" # verl's megatron layers are Transformer Engine's (sequence parallel needs them)

[engines.rollout]
backend = "vllm"                        # rollout.name
agent_workers = 4                       # rollout.agent.num_workers 8, each owning 1 of 4 servers
replicas = 4                            # 8 GPUs / rollout.tensor_model_parallel_size 2

[engines.rollout.options]
tensor_parallel_size = 2                # rollout.tensor_model_parallel_size
gpu_memory_utilization = 0.6            # rollout.gpu_memory_utilization
enforce_eager = false                   # rollout.enforce_eager
enable_prefix_caching = true            # rollout.enable_prefix_caching

[resources]
mode = "ray"                            # verl runs on Ray
nodes = 1                               # trainer.nnodes
devices_per_node = 8                    # trainer.n_gpus_per_node
placement = "colocate"                  # hybrid_engine (shared GPUs)

[schedule]
total_steps = 105                       # trainer.total_training_steps / total_epochs
eval_every = 5                          # trainer.test_freq (-1 = never)
save_every = 20                         # trainer.save_freq (-1 = only at the end)

[logging]
sinks = ["console", "jsonl"]            # trainer.logger (+ jsonl, which rlctl report reads)
""", 'ppo_critic': """\
# deepseek_llm_7b_function_rm: migrated from verl by `rlctl config migrate`.
#
# verl run:  gae on deepseek-ai/deepseek-llm-7b-chat, fsdp training + vllm rollout on 8 GPUs
# Made by:   rlctl config migrate tests/cli/migrate_fixtures/verl-b178a3cd/ppo_trainer.yaml --verl-script tests/cli/migrate_fixtures/verl-b178a3cd/ppo_critic_deepseek7b.sh --var HOME=/data --reward gsm8k --train-rows 7473 -o <tmp>/ppo_critic.toml
# After each value: the verl key it came from (actor., rollout., ref., model. are under
# actor_rollout_ref). The migration report accounts for every verl key: mapped, dropped
# (no effect here) or unsupported, and why.
#
# Run:       rlctl train <tmp>/ppo_critic.toml
# Check:     rlctl config validate <tmp>/ppo_critic.toml
# Inspect:   rlctl config show <tmp>/ppo_critic.toml   (derived batch numbers = verl's)

[run]
device = "cuda"                         # trainer.device
name = "deepseek_llm_7b_function_rm"    # trainer.experiment_name
seed = 42                               # actor.fsdp_config.seed (rlctl derives every seed from run.seed)

[model]
dtype = "float32"                       # actor.fsdp_config.model_dtype (parameters and master weights)
path = "deepseek-ai/deepseek-llm-7b-chat" # model.path
trust_remote_code = false               # model.trust_remote_code
gradient_checkpointing = true           # model.enable_gradient_checkpointing

[critic]
enabled = true                          # algorithm.adv_estimator = gae (verl trains a critic for gae)
warmup_steps = 0                        # trainer.critic_warmup
path = "deepseek-ai/deepseek-llm-7b-chat" # critic.model.path
cliprange_value = 0.5                   # critic.cliprange_value
lr = 1e-05                              # critic.optim.lr

[data]
train = "/data/data/gsm8k/train.parquet" # data.train_files
val = "/data/data/gsm8k/test.parquet"   # data.val_files
prompt_key = "prompt"                   # data.prompt_key
max_prompt_tokens = 512                 # data.max_prompt_length
shuffle = true                          # data.shuffle

[algorithm]
estimator = "gae"                       # algorithm.adv_estimator
gamma = 1.0                             # algorithm.gamma
lam = 1.0                               # algorithm.lam
norm_adv_by_std = true                  # algorithm.norm_adv_by_std_in_grpo
prompts_per_step = 1024                 # data.train_batch_size (prompts)
group_size = 1                          # rollout.n
minibatches = 4                         # train_batch_size / ppo_mini_batch_size = 1024 / 256 (prompts)
epochs = 1                              # actor.ppo_epochs
shuffle_minibatches = false             # actor.shuffle

[algorithm.loss]
policy_loss = "vanilla"                 # actor.policy_loss.loss_mode
clip_low = 0.2                          # actor.clip_ratio_low
clip_high = 0.2                         # actor.clip_ratio_high
clip_ratio_c = 3.0                      # actor.clip_ratio_c (dual clip)
agg = "token-mean"                      # actor.loss_agg_mode
entropy_coef = 0.0                      # actor.entropy_coeff

[algorithm.kl]
in = "none"                             # actor.use_kl_loss = algorithm.use_kl_in_reward = false

[algorithm.optim]
lr = 1e-06                              # actor.optim.lr
weight_decay = 0.01                     # actor.optim.weight_decay
betas = [0.9, 0.999]                    # actor.optim.betas
grad_clip = 1.0                         # actor.grad_clip
name = "adamw"                          # actor.optim.optimizer
min_lr_ratio = 0.0                      # actor.optim.min_lr_ratio
scheduler = "constant"                  # actor.optim.lr_scheduler_type
warmup_steps = 0                        # actor.optim.lr_warmup_steps

[rollout]
temperature = 1.0                       # rollout.temperature
top_k = 0                               # rollout.top_k (-1 = off)
top_p = 1.0                             # rollout.top_p
max_new_tokens = 512                    # rollout.response_length
val_temperature = 0.0                   # val_kwargs.do_sample = false
val_group_size = 1                      # rollout.val_kwargs.n
agent_loop = "single_turn"              # rollout.agent.default_agent_loop

[[rewards]]
name = "gsm8k"                          # --reward

[engines.train]
backend = "fsdp"                        # actor.strategy
ranks = 8                               # trainer.nnodes x trainer.n_gpus_per_node
micro_batch_size = 16                   # actor.ppo_micro_batch_size_per_gpu (samples per rank)
log_prob_micro_batch_size = 32          # rollout.log_prob_micro_batch_size_per_gpu

[engines.train.options]
mixed_precision = "bf16"                # actor.fsdp_config.dtype (compute dtype)
cpu_offload = false                     # actor.fsdp_config.*_offload
reshard_after_forward = true            # actor.fsdp_config.reshard_after_forward

[engines.rollout]
backend = "vllm"                        # rollout.name
agent_workers = 2                       # rollout.agent.num_workers 8, each owning 1 of 2 servers
replicas = 2                            # 8 GPUs / rollout.tensor_model_parallel_size 4

[engines.rollout.options]
tensor_parallel_size = 4                # rollout.tensor_model_parallel_size
gpu_memory_utilization = 0.4            # rollout.gpu_memory_utilization
enforce_eager = false                   # rollout.enforce_eager
enable_prefix_caching = true            # rollout.enable_prefix_caching

[resources]
mode = "ray"                            # verl runs on Ray
nodes = 1                               # trainer.nnodes
devices_per_node = 8                    # trainer.n_gpus_per_node
placement = "colocate"                  # hybrid_engine (shared GPUs)

[schedule]
total_steps = 105                       # trainer.total_training_steps / total_epochs
eval_every = 1                          # trainer.test_freq (-1 = never)
save_every = 20                         # trainer.save_freq (-1 = only at the end)

[logging]
sinks = ["console", "jsonl"]            # trainer.logger (+ jsonl, which rlctl report reads)
""", 'ppo_moe': """\
# qwen1.5_moe_nochat: migrated from verl by `rlctl config migrate`.
#
# verl run:  gae on /data/models/Qwen/Qwen1.5-MoE-A2.7B-Chat, megatron training + vllm rollout on 32 GPUs
# Made by:   rlctl config migrate tests/cli/migrate_fixtures/verl-b178a3cd/ppo_megatron_trainer.yaml --verl-script tests/cli/migrate_fixtures/verl-b178a3cd/ppo_moe_qwen1.5_megatron.sh --var HOME=/data --reward gsm8k --train-rows 7473 -o <tmp>/ppo_moe.toml
# After each value: the verl key it came from (actor., rollout., ref., model. are under
# actor_rollout_ref). The migration report accounts for every verl key: mapped, dropped
# (no effect here) or unsupported, and why.
#
# Run:       rlctl train <tmp>/ppo_moe.toml
# Check:     rlctl config validate <tmp>/ppo_moe.toml
# Inspect:   rlctl config show <tmp>/ppo_moe.toml   (derived batch numbers = verl's)

[run]
device = "cuda"                         # trainer.device
name = "qwen1.5_moe_nochat"             # trainer.experiment_name
seed = 42                               # actor.megatron.seed (rlctl derives every seed from run.seed)

[model]
dtype = "float32"                       # verl's megatron optimizer keeps fp32 master weights
path = "/data/models/Qwen/Qwen1.5-MoE-A2.7B-Chat" # model.path
trust_remote_code = false               # model.trust_remote_code
gradient_checkpointing = true           # model.enable_gradient_checkpointing

[critic]
enabled = true                          # algorithm.adv_estimator = gae (verl trains a critic for gae)
warmup_steps = 0                        # trainer.critic_warmup
path = "/data/models/Qwen/Qwen1.5-MoE-A2.7B-Chat" # critic.model.path
cliprange_value = 0.5                   # critic.cliprange_value
lr = 1e-05                              # critic.optim.lr

[data]
train = "/data/data/gsm8k/train.parquet" # data.train_files
val = "/data/data/gsm8k/test.parquet"   # data.val_files
prompt_key = "prompt"                   # data.prompt_key
max_prompt_tokens = 1024                # data.max_prompt_length
shuffle = true                          # data.shuffle

[algorithm]
estimator = "gae"                       # algorithm.adv_estimator
gamma = 1.0                             # algorithm.gamma
lam = 1.0                               # algorithm.lam
norm_adv_by_std = true                  # algorithm.norm_adv_by_std_in_grpo
prompts_per_step = 1024                 # data.train_batch_size (prompts)
group_size = 1                          # rollout.n
minibatches = 4                         # train_batch_size / ppo_mini_batch_size = 1024 / 256 (prompts)
epochs = 1                              # actor.ppo_epochs
shuffle_minibatches = false             # actor.shuffle

[algorithm.loss]
policy_loss = "vanilla"                 # actor.policy_loss.loss_mode
clip_low = 0.2                          # actor.clip_ratio_low
clip_high = 0.2                         # actor.clip_ratio_high
clip_ratio_c = 3.0                      # actor.clip_ratio_c (dual clip)
agg = "token-mean"                      # actor.loss_agg_mode
entropy_coef = 0.0                      # actor.entropy_coeff

[algorithm.kl]
in = "none"                             # actor.use_kl_loss = algorithm.use_kl_in_reward = false

[algorithm.optim]
lr = 1e-06                              # actor.optim.lr
weight_decay = 0.01                     # actor.optim.weight_decay
betas = [0.9, 0.999]                    # actor.optim.betas
grad_clip = 1.0                         # actor.optim.clip_grad
name = "adamw"                          # actor.optim.optimizer
min_lr_ratio = 0.0                      # actor.optim.min_lr
scheduler = "constant"                  # actor.optim.lr_decay_style
warmup_steps = 0                        # actor.optim.lr_warmup_steps

[rollout]
temperature = 1.0                       # rollout.temperature
top_k = 0                               # rollout.top_k (-1 = off)
top_p = 1.0                             # rollout.top_p
max_new_tokens = 512                    # rollout.response_length
val_temperature = 0.0                   # val_kwargs.do_sample = false
val_group_size = 1                      # rollout.val_kwargs.n
agent_loop = "single_turn"              # rollout.agent.default_agent_loop

[[rewards]]
name = "gsm8k"                          # --reward

[engines.train]
backend = "megatron"                    # actor.strategy
ranks = 32                              # trainer.nnodes x trainer.n_gpus_per_node
micro_batch_size = 4                    # actor.ppo_micro_batch_size_per_gpu (samples per rank)
log_prob_micro_batch_size = 2           # rollout.log_prob_micro_batch_size_per_gpu

[engines.train.options]
tensor_parallel = 4                     # actor.megatron.tensor_model_parallel_size
pipeline_parallel = 2                   # actor.megatron.pipeline_model_parallel_size
sequence_parallel = true                # actor.megatron.sequence_parallel (needs TP > 1)
transformer_impl = "transformer_engine" # verl's megatron layers are Transformer Engine's (sequence parallel needs them)

[engines.rollout]
backend = "vllm"                        # rollout.name
agent_workers = 8                       # rollout.agent.num_workers
replicas = 8                            # 32 GPUs / rollout.tensor_model_parallel_size 4

[engines.rollout.options]
tensor_parallel_size = 4                # rollout.tensor_model_parallel_size
gpu_memory_utilization = 0.7            # rollout.gpu_memory_utilization
enforce_eager = false                   # rollout.enforce_eager
enable_prefix_caching = true            # rollout.enable_prefix_caching

[resources]
mode = "ray"                            # verl runs on Ray
nodes = 4                               # trainer.nnodes
devices_per_node = 8                    # trainer.n_gpus_per_node
placement = "colocate"                  # hybrid_engine (shared GPUs)

[schedule]
total_steps = 700                       # trainer.total_training_steps / total_epochs
eval_every = 5                          # trainer.test_freq (-1 = never)
save_every = 20                         # trainer.save_freq (-1 = only at the end)

[logging]
sinks = ["console", "jsonl"]            # trainer.logger (+ jsonl, which rlctl report reads)
"""})[case]
    assert result.stderr.splitlines()[-2:] == [f"wrote {out}", f"wrote {tmp_path / 'report.txt'}"]
    assert rlctl("config", "validate", "--skip-data", str(out)).stdout.startswith("ok: ")


@pytest.mark.parametrize("case", list(CASES))
def test_full_report_accounts_for_every_verl_key(rlctl, tmp_path: Path, case: str) -> None:  # type: ignore[no-untyped-def]
    from omegaconf import OmegaConf

    report = tmp_path / "report.txt"
    _migrate(rlctl, tmp_path, case, "--report", str(report))
    text = report.read_text()
    # the leaves verl sees: interpolations resolved (some resolve to whole tables)
    cfg = OmegaConf.to_container(OmegaConf.load(CASES[case][0]), resolve=True)

    def leaves(value, prefix=""):  # type: ignore[no-untyped-def]
        if isinstance(value, dict) and value:
            for k, v in value.items():
                yield from leaves(v, f"{prefix}.{k}" if prefix else k)
        else:
            yield prefix

    listed = {line[3:].split(" = ", 1)[0] for line in text.splitlines()
              if line.startswith(("   ", " * ", " y ")) and " = " in line}
    missing = [k for k in leaves(cfg) if k not in listed]
    assert missing == []


@pytest.mark.parametrize("case", list(CASES))
def test_config_show_derives_verls_batch_numbers(rlctl, tmp_path: Path, case: str) -> None:  # type: ignore[no-untyped-def]
    result, out = _migrate(rlctl, tmp_path, case)
    shown = json.loads(rlctl("config", "show", str(out), "-f", "json").stdout)["derived"]
    table = {line.split()[0]: int(line.split()[1]) for line in result.stdout.splitlines()
             if line.startswith("   ") and line.split()[0] in shown}
    assert table == {k: v for k, v in shown.items() if k in table} and len(table) == len(shown)


def test_batch_numbers_follow_verls_normalisation(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # GRPO megatron: 1024 prompts x n 5; mini 256 prompts -> 4 minibatches of 1280 samples;
    # TP 2 x PP 2 on 8 GPUs -> 2 data-parallel ranks of 640 samples, micro 4 -> 160 passes
    _, out = _migrate(rlctl, tmp_path, "grpo_megatron")
    shown = json.loads(rlctl("config", "show", str(out), "-f", "json").stdout)
    assert shown["derived"] == {
        "samples_per_step": 5120, "prompts_per_minibatch": 256, "minibatch_size": 1280,
        "data_parallel_size": 2, "minibatch_size_per_rank": 640, "micro_batches_per_rank": 160,
        "grad_accumulation_steps": 160, "optimizer_steps_per_train_step": 4}
    assert shown["recipe"]["data"]["train"] == ["/data/data/gsm8k/train.parquet",
                                                "/data/data/math/train.parquet"]


def test_overrides_from_arguments_and_a_file_apply_after_the_script(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    extra = tmp_path / "more.txt"
    extra.write_text("# tuning\nactor_rollout_ref.rollout.n=8\n\ntrainer.total_training_steps=50\n")
    result, out = _migrate(rlctl, tmp_path, "grpo_fsdp", "--overrides-file", str(extra),
                           "actor_rollout_ref.rollout.n=10", "+trainer.new_switch=false")
    recipe = tomllib.loads(out.read_text())
    assert recipe["algorithm"]["group_size"] == 10  # the argument beats the file and the script
    assert recipe["schedule"]["total_steps"] == 50
    assert "+ 41 overrides (37 from grpo_fsdp_qwen2-7b.sh, 2 from more.txt, 2 from argument)" \
        in result.stdout
    assert " * trainer.new_switch = false: a key rlctl does not know, at an off value" \
        in result.stdout


def test_an_unset_shell_variable_is_reported_never_guessed(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "x.toml"
    result = rlctl("config", "migrate", FSDP, "--verl-script", str(FIX / "grpo_fsdp_qwen2-7b.sh"),
                   "--reward", "gsm8k", "-o", str(out), code=2)
    assert not out.exists()
    assert result.stderr == snapshot("""\
error: cannot migrate faithfully (1 problem); nothing written:
  $HOME: shell variable not set by the script (used in: data.train_files=${HOME}/data/gsm8k/train.parquet; data.val_files=${HOME}/data/gsm8k/test.parquet)
      fix: pass --var HOME=VALUE (the migration never guesses it)
""")


def test_dapo_moe_run_is_refused_key_by_key(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "dapo.toml"
    result = rlctl("config", "migrate", MEGATRON, "--verl-script",
                   str(FIX / "dapo_moe_qwen3-30b_megatron.sh"), "--var", "HOME=/data",
                   "--var", "aime24_test_path=/data/aime-2024.parquet", "--reward", "gsm8k",
                   "-o", str(out), code=2)
    assert not out.exists()
    assert result.stderr == snapshot("""\
error: cannot migrate faithfully (3 problems); nothing written:
  --train-rows: trainer.total_epochs = 10: verl runs epochs x (training rows // data.train_batch_size) steps, and the row count is unknown
      fix: pass --train-rows N (rows of the training set), or set trainer.total_training_steps
  actor_rollout_ref.actor.optim.lr_warmup_steps: verl steps the learning-rate schedule once per training step, rlctl once per optimizer step, and this recipe makes 4 optimizer steps per training step: the warm-up / decay would not match
      fix: use a constant schedule without warm-up, or one minibatch and one epoch
  actor_rollout_ref.model.override_config.model_config.max_position_embeddings: 10240: an override of the model's config, which rlctl cannot reproduce
      fix: remove '+actor_rollout_ref.model.override_config.model_config.max_position_embeddings=10240' (dapo_moe_qwen3-30b_megatron.sh), or keep this run on verl
""")
    assert "the script's defaults used (--var NAME=VALUE changes one): ACTOR_CP=1, " \
        in result.stdout and " NNODES=1, " in result.stdout


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("algorithm.adv_estimator=ppo_magic", "algorithm.adv_estimator"),
        ("actor_rollout_ref.actor.policy_loss.loss_mode=mystery", "actor_rollout_ref.actor.policy_loss.loss_mode"),
        ("actor_rollout_ref.actor.kl_loss_type=k3+", "actor_rollout_ref.actor.kl_loss_type"),
        ("actor_rollout_ref.actor.ppo_mini_batch_size=300", "actor_rollout_ref.actor.ppo_mini_batch_size"),
        ("algorithm.use_kl_in_reward=true", "actor_rollout_ref.actor.use_kl_loss"),
        ("actor_rollout_ref.actor.optim.lr_warmup_steps=10", "actor_rollout_ref.actor.optim.lr_warmup_steps"),
        ("+actor_rollout_ref.actor.brand_new=3", "actor_rollout_ref.actor.brand_new"),
    ],
)
def test_a_setting_that_changes_the_math_exits_2_naming_the_key(rlctl, tmp_path: Path, override: str, key: str) -> None:  # type: ignore[no-untyped-def]
    result, out = _migrate(rlctl, tmp_path, "grpo_fsdp", override, code=2)
    assert not out.exists()
    assert f"\n  {key}: " in result.stderr


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("actor_rollout_ref.actor.no_such_key=1", "Hydra refuses to add keys without +"),
        ("+data.train_batch_size=3", "already in the verl config"),
        ("data.train_batch_size=1,2", "a multirun sweep"),
        ("data.train_batch_size=[", "not a Hydra override"),
    ],
)
def test_overrides_hydra_would_refuse_exit_2(rlctl, tmp_path: Path, override: str, message: str) -> None:  # type: ignore[no-untyped-def]
    result, out = _migrate(rlctl, tmp_path, "grpo_fsdp", override, code=2)
    assert message in result.stderr and not out.exists()


def test_a_missing_reward_is_asked_for(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "x.toml"
    result = rlctl("config", "migrate", FSDP, "--verl-script", str(FIX / "grpo_fsdp_qwen2-7b.sh"),
                   "--var", "HOME=/data", "--train-rows", "7473", "-o", str(out), code=2)
    assert "--reward: custom_reward_function.path unset: verl scores with its built-in reward" \
        in result.stderr
    assert "pass --reward NAME" in result.stderr


def test_unknown_epoch_length_is_asked_for(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "x.toml"
    result = rlctl("config", "migrate", FSDP, "--verl-script", str(FIX / "grpo_fsdp_qwen2-7b.sh"),
                   "--var", "HOME=/data", "--reward", "gsm8k", "-o", str(out), code=2)
    assert "--train-rows: trainer.total_epochs = 15: verl runs epochs" in result.stderr


def test_nothing_is_overwritten_without_force(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "grpo_fsdp.toml"
    out.write_text("# mine\n")
    result, _ = _migrate(rlctl, tmp_path, "grpo_fsdp", code=2)
    assert "exists; migrate writes only new files" in result.stderr
    assert out.read_text() == "# mine\n"
    _migrate(rlctl, tmp_path, "grpo_fsdp", "--force")
    assert out.read_text().startswith("# qwen2_7b_function_rm: migrated from verl")


def test_a_script_without_a_main_ppo_call(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "run.sh"
    script.write_text("echo hello\npython3 train.py a=1\n")
    result = rlctl("config", "migrate", FSDP, "--verl-script", str(script), "-o",
                   str(tmp_path / "x.toml"), code=2)
    assert "no `python3 -m verl.trainer.main_ppo` call found" in result.stderr


def test_migrate_imports_no_heavy_library(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.cli.cli_helpers import ROOT

    code = ("import sys; from rlctl.cli.app import main; sys.argv=['rlctl','config','migrate',"
            f"'{FSDP}','--verl-script','{FIX / 'grpo_fsdp_qwen2-7b.sh'}','--var','HOME=/d',"
            f"'--reward','gsm8k','--train-rows','7473','-o',{str(tmp_path / 'x.toml')!r}]\n"
            "try:\n main()\nexcept SystemExit: pass\n"
            "print(sorted(m for m in ('torch','ray','transformers') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.stdout.strip().splitlines()[-1:] == ["[]"], proc.stderr
