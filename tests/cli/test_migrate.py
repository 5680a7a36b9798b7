"""``rlctl config migrate`` on verl's own generated configs and example launch scripts.

Fixtures (tests/cli/migrate_fixtures) are verl's published files: the two generated trainer
configs and five example scripts (GRPO FSDP, GRPO Megatron, PPO with a critic, a MoE PPO on
Megatron, and a DAPO MoE run refused for what rlctl lacks; test_migrate_dapo.py migrates
it once those are removed, with verl's filter_groups and reward model).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from inline_snapshot import snapshot

FIX = Path("tests/cli/migrate_fixtures")
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
verl config tests/cli/migrate_fixtures/ppo_trainer.yaml + 37 overrides (37 from grpo_fsdp_qwen2-7b.sh)
   launch script tests/cli/migrate_fixtures/grpo_fsdp_qwen2-7b.sh: main_ppo call at line 5
   the call forwards "$@": give extra overrides as arguments
   591 verl keys, 45 set by the overrides (*): 79 mapped, 510 dropped (no effect in rlctl), 2 unsupported but no effect on the math, 0 refused

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

mapped (79): verl key = value -> rlctl key
   actor_rollout_ref.actor.clip_ratio_c = 3.0 -> algorithm.loss.clip_ratio_c
   actor_rollout_ref.actor.clip_ratio_high = 0.2 -> algorithm.loss.clip_high
   actor_rollout_ref.actor.clip_ratio_low = 0.2 -> algorithm.loss.clip_low
 * actor_rollout_ref.actor.entropy_coeff = 0 -> algorithm.loss.entropy_coef
   actor_rollout_ref.actor.fsdp_config.dtype = 'bfloat16' -> engines.train.options.mixed_precision
   actor_rollout_ref.actor.fsdp_config.model_dtype = 'fp32' -> model.dtype
   actor_rollout_ref.actor.fsdp_config.offload_policy = false -> engines.train.options.cpu_offload
 * actor_rollout_ref.actor.fsdp_config.optimizer_offload = false -> engines.train.options.cpu_offload
 * actor_rollout_ref.actor.fsdp_config.param_offload = false -> engines.train.options.cpu_offload
   actor_rollout_ref.actor.fsdp_config.reshard_after_forward = true -> engines.train.options.reshard_after_forward
   actor_rollout_ref.actor.fsdp_config.seed = 42 -> run.seed
   actor_rollout_ref.actor.grad_clip = 1.0 -> algorithm.optim.grad_clip
 * actor_rollout_ref.actor.kl_loss_coef = 0.001 -> algorithm.kl.coef
 * actor_rollout_ref.actor.kl_loss_type = 'low_var_kl' -> algorithm.kl.estimator
   actor_rollout_ref.actor.loss_agg_mode = 'token-mean' -> algorithm.loss.agg
   actor_rollout_ref.actor.optim.betas = [0.9, 0.999] -> algorithm.optim.betas
 * actor_rollout_ref.actor.optim.lr = 1e-06 -> algorithm.optim.lr
   actor_rollout_ref.actor.optim.lr_scheduler_type = 'constant' -> algorithm.optim.scheduler
   actor_rollout_ref.actor.optim.lr_warmup_steps = -1 -> algorithm.optim.warmup_steps
   actor_rollout_ref.actor.optim.lr_warmup_steps_ratio = 0.0 -> algorithm.optim.warmup_steps
   actor_rollout_ref.actor.optim.min_lr_ratio = 0.0 -> algorithm.optim.min_lr_ratio
   actor_rollout_ref.actor.optim.optimizer = 'AdamW' -> algorithm.optim.name
   actor_rollout_ref.actor.optim.weight_decay = 0.01 -> algorithm.optim.weight_decay
   actor_rollout_ref.actor.policy_loss.loss_mode = 'vanilla' -> algorithm.loss.policy_loss
   actor_rollout_ref.actor.ppo_epochs = 1 -> algorithm.epochs
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 40 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.ppo_mini_batch_size = 256 -> algorithm.minibatches
   actor_rollout_ref.actor.shuffle = false -> algorithm.shuffle_minibatches
   actor_rollout_ref.actor.strategy = 'fsdp' -> engines.train.backend
   actor_rollout_ref.actor.use_dynamic_bsz = false -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_kl_loss = true -> algorithm.kl.in
 * actor_rollout_ref.model.enable_gradient_checkpointing = true -> model.gradient_checkpointing
 * actor_rollout_ref.model.path = 'Qwen/Qwen2-7B-Instruct' -> model.path
   actor_rollout_ref.model.tokenizer_path = null -> model.tokenizer
   actor_rollout_ref.model.trust_remote_code = false -> model.trust_remote_code
   actor_rollout_ref.rollout.agent.default_agent_loop = 'single_turn_agent' -> rollout.agent_loop
   actor_rollout_ref.rollout.agent.num_workers = 8 -> engines.rollout.agent_workers
   actor_rollout_ref.rollout.do_sample = true -> rollout.temperature
   actor_rollout_ref.rollout.enable_prefix_caching = true -> engines.rollout.options.enable_prefix_caching
   actor_rollout_ref.rollout.enforce_eager = false -> engines.rollout.options.enforce_eager
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
   actor_rollout_ref.rollout.ignore_eos = false -> engines.rollout.options.ignore_eos
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 40 -> engines.train.log_prob_micro_batch_size
   actor_rollout_ref.rollout.max_model_len = null -> engines.rollout.options.max_model_len
 * actor_rollout_ref.rollout.n = 5 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * actor_rollout_ref.rollout.response_length = 1024 -> rollout.max_new_tokens
   actor_rollout_ref.rollout.temperature = 1.0 -> rollout.temperature
 * actor_rollout_ref.rollout.tensor_model_parallel_size = 2 -> engines.rollout.replicas
   actor_rollout_ref.rollout.top_k = -1 -> rollout.top_k
   actor_rollout_ref.rollout.top_p = 1 -> rollout.top_p
   actor_rollout_ref.rollout.val_kwargs.do_sample = false -> rollout.val_temperature
   actor_rollout_ref.rollout.val_kwargs.n = 1 -> rollout.val_group_size
   actor_rollout_ref.rollout.val_kwargs.temperature = 0 -> rollout.val_temperature
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
   algorithm.gamma = 1.0 -> algorithm.gamma
   algorithm.lam = 1.0 -> algorithm.lam
   algorithm.norm_adv_by_std_in_grpo = true -> algorithm.norm_adv_by_std
 * algorithm.use_kl_in_reward = false -> algorithm.kl.in
   critic.enable = null -> critic.enabled
   custom_reward_function.path = null -> rewards (--reward)
 * data.max_prompt_length = 512 -> data.max_prompt_tokens
   data.prompt_key = 'prompt' -> data.prompt_key
   data.shuffle = true -> data.shuffle
   data.tokenizer = null -> model.tokenizer
 * data.train_batch_size = 1024 -> algorithm.prompts_per_step
 * data.train_files = '/data/data/gsm8k/train.parquet' -> data.train
 * data.val_files = '/data/data/gsm8k/test.parquet' -> data.val
   ray_kwargs.ray_init.num_cpus = null -> resources.num_cpus
   trainer.device = 'cuda' -> run.device
 * trainer.experiment_name = 'qwen2_7b_function_rm' -> run.name
 * trainer.logger = ['console', 'wandb'] -> logging.sinks
   trainer.max_actor_ckpt_to_keep = null -> schedule.keep_last
 * trainer.n_gpus_per_node = 8 -> resources.devices_per_node
 * trainer.nnodes = 1 -> resources.nodes
 * trainer.project_name = 'verl_grpo_example_gsm8k' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

unsupported, ignored (2): no effect on the math
 * actor_rollout_ref.ref.fsdp_config.param_offload = true: rlctl uses the actor's engine options (one [engines.train.options]) (False) here
   trainer.val_before_train = true: rlctl validates every schedule.eval_every steps, not before the first (validation, not training)

dropped, set by the overrides (13): no effect in rlctl
 * actor_rollout_ref.actor.rollout_n = 5: copy of actor_rollout_ref.rollout.n (algorithm.group_size)
 * actor_rollout_ref.model.use_remove_padding = true: rlctl packs sequences its own way (no math effect)
 * actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 40: same as the rollout's log-prob micro-batch (rlctl has one)
 * actor_rollout_ref.ref.rollout_n = 5: copy of actor_rollout_ref.rollout.n (algorithm.group_size)
 * actor_rollout_ref.rollout.prometheus.served_model_name = 'Qwen/Qwen2-7B-Instruct': metrics export
 * critic.model.tokenizer_path = 'Qwen/Qwen2-7B-Instruct': no critic in this run
 * critic.rollout_n = 5: no critic in this run
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 1024: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * data.truncation = 'error': error, as rlctl: over-long prompts are refused
 * reward_model.model.input_tokenizer = 'Qwen/Qwen2-7B-Instruct': reward models are off
 * trainer.critic_warmup = 0: no critic
 * trainer.default_local_dir = 'checkpoints/verl_grpo_example_gsm8k/qwen2_7b_function_rm': rlctl writes checkpoints under run.output_dir/run.name

dropped at the YAML's values (497): no effect in rlctl
     88 no critic in this run
     75 profiling
     46 verl's dataclass to build: no meaning outside verl
     31 reward models are off
     13 multi-turn is off
     11 a copy of model.mtp (checked there)
     10 memory saving
     10 multi-token prediction is off
      9 kernel choice
      8 at 1
      6 at False
      6 rollout correction is off (rollout_is = null)
      6 the KL is in the loss
      4 LoRA is off
      4 MoE router replay is off
      4 at -1
      4 dataset output format
      3 at {}
      3 metrics export
      3 model loading detail
      3 overlap tuning
      3 rlctl shards per decoder layer
      3 rollout tracing
      3 same as the actor's engine options (one [engines.train.options])
      3 server batching (speed)
      3 token budget of dynamic batching (memory)
      3 used only by the clip_cov policy loss
      3 weight-sync transport
      3 what verl's checkpoints hold; rlctl saves model, optimizer and state
    126 for 106 other reasons
   (`--report FILE` lists each key with its reason)
""", 'grpo_megatron': """\
verl config tests/cli/migrate_fixtures/ppo_megatron_trainer.yaml + 39 overrides (39 from grpo_megatron_qwen2-7b_math.sh)
   launch script tests/cli/migrate_fixtures/grpo_megatron_qwen2-7b_math.sh: main_ppo call at line 20
   the call forwards "$@": give extra overrides as arguments
   651 verl keys, 49 set by the overrides (*): 80 mapped, 568 dropped (no effect in rlctl), 3 unsupported but no effect on the math, 0 refused

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

mapped (80): verl key = value -> rlctl key
   actor_rollout_ref.actor.clip_ratio_c = 3.0 -> algorithm.loss.clip_ratio_c
   actor_rollout_ref.actor.clip_ratio_high = 0.2 -> algorithm.loss.clip_high
   actor_rollout_ref.actor.clip_ratio_low = 0.2 -> algorithm.loss.clip_low
 * actor_rollout_ref.actor.entropy_coeff = 0 -> algorithm.loss.entropy_coef
 * actor_rollout_ref.actor.kl_loss_coef = 0.001 -> algorithm.kl.coef
 * actor_rollout_ref.actor.kl_loss_type = 'low_var_kl' -> algorithm.kl.estimator
   actor_rollout_ref.actor.loss_agg_mode = 'token-mean' -> algorithm.loss.agg
   actor_rollout_ref.actor.megatron.context_parallel_size = 1 -> engines.train.options.context_parallel
   actor_rollout_ref.actor.megatron.expert_model_parallel_size = 1 -> engines.train.options.expert_parallel
   actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity = null -> engines.train.options.recompute_granularity
 * actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 2 -> engines.train.options.pipeline_parallel
   actor_rollout_ref.actor.megatron.seed = 42 -> run.seed
   actor_rollout_ref.actor.megatron.sequence_parallel = true -> engines.train.options.sequence_parallel
 * actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 2 -> engines.train.options.tensor_parallel
   actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size = null -> engines.train.options.virtual_pipeline_parallel
   actor_rollout_ref.actor.optim.betas = [0.9, 0.999] -> algorithm.optim.betas
   actor_rollout_ref.actor.optim.clip_grad = 1.0 -> algorithm.optim.grad_clip
 * actor_rollout_ref.actor.optim.lr = 1e-06 -> algorithm.optim.lr
   actor_rollout_ref.actor.optim.lr_decay_style = 'constant' -> algorithm.optim.scheduler
   actor_rollout_ref.actor.optim.lr_warmup_steps = -1 -> algorithm.optim.warmup_steps
   actor_rollout_ref.actor.optim.lr_warmup_steps_ratio = 0.0 -> algorithm.optim.warmup_steps
   actor_rollout_ref.actor.optim.min_lr = 0.0 -> algorithm.optim.min_lr_ratio
   actor_rollout_ref.actor.optim.optimizer = 'adam' -> algorithm.optim.name
   actor_rollout_ref.actor.optim.weight_decay = 0.01 -> algorithm.optim.weight_decay
   actor_rollout_ref.actor.policy_loss.loss_mode = 'vanilla' -> algorithm.loss.policy_loss
   actor_rollout_ref.actor.ppo_epochs = 1 -> algorithm.epochs
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.ppo_mini_batch_size = 256 -> algorithm.minibatches
   actor_rollout_ref.actor.shuffle = false -> algorithm.shuffle_minibatches
   actor_rollout_ref.actor.strategy = 'megatron' -> engines.train.backend
   actor_rollout_ref.actor.use_dynamic_bsz = false -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_kl_loss = true -> algorithm.kl.in
   actor_rollout_ref.model.enable_gradient_checkpointing = true -> model.gradient_checkpointing
 * actor_rollout_ref.model.path = 'Qwen/Qwen2-7B-Instruct' -> model.path
   actor_rollout_ref.model.tokenizer_path = null -> model.tokenizer
   actor_rollout_ref.model.trust_remote_code = false -> model.trust_remote_code
   actor_rollout_ref.rollout.agent.default_agent_loop = 'single_turn_agent' -> rollout.agent_loop
   actor_rollout_ref.rollout.agent.num_workers = 8 -> engines.rollout.agent_workers
   actor_rollout_ref.rollout.do_sample = true -> rollout.temperature
   actor_rollout_ref.rollout.enable_prefix_caching = true -> engines.rollout.options.enable_prefix_caching
   actor_rollout_ref.rollout.enforce_eager = false -> engines.rollout.options.enforce_eager
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.6 -> engines.rollout.options.gpu_memory_utilization
   actor_rollout_ref.rollout.ignore_eos = false -> engines.rollout.options.ignore_eos
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 4 -> engines.train.log_prob_micro_batch_size
   actor_rollout_ref.rollout.max_model_len = null -> engines.rollout.options.max_model_len
 * actor_rollout_ref.rollout.n = 5 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
 * actor_rollout_ref.rollout.response_length = 1024 -> rollout.max_new_tokens
   actor_rollout_ref.rollout.temperature = 1.0 -> rollout.temperature
 * actor_rollout_ref.rollout.tensor_model_parallel_size = 2 -> engines.rollout.replicas
   actor_rollout_ref.rollout.top_k = -1 -> rollout.top_k
   actor_rollout_ref.rollout.top_p = 1 -> rollout.top_p
   actor_rollout_ref.rollout.val_kwargs.do_sample = false -> rollout.val_temperature
   actor_rollout_ref.rollout.val_kwargs.n = 1 -> rollout.val_group_size
   actor_rollout_ref.rollout.val_kwargs.temperature = 0 -> rollout.val_temperature
 * algorithm.adv_estimator = 'grpo' -> algorithm.estimator
   algorithm.gamma = 1.0 -> algorithm.gamma
   algorithm.lam = 1.0 -> algorithm.lam
   algorithm.norm_adv_by_std_in_grpo = true -> algorithm.norm_adv_by_std
 * algorithm.use_kl_in_reward = false -> algorithm.kl.in
   critic.enable = null -> critic.enabled
   custom_reward_function.path = null -> rewards (--reward)
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
   data.prompt_key = 'prompt' -> data.prompt_key
   data.shuffle = true -> data.shuffle
   data.tokenizer = null -> model.tokenizer
 * data.train_batch_size = 1024 -> algorithm.prompts_per_step
 * data.train_files = ['/data/data/gsm8k/train.parquet', '/data/data/math/train... -> data.train
 * data.val_files = ['/data/data/gsm8k/test.parquet', '/data/data/math/test.p... -> data.val
   ray_kwargs.ray_init.num_cpus = null -> resources.num_cpus
   trainer.device = 'cuda' -> run.device
 * trainer.experiment_name = 'qwen2_7b_megatron' -> run.name
 * trainer.logger = ['console', 'wandb'] -> logging.sinks
   trainer.max_actor_ckpt_to_keep = null -> schedule.keep_last
 * trainer.n_gpus_per_node = 8 -> resources.devices_per_node
 * trainer.nnodes = 1 -> resources.nodes
 * trainer.project_name = 'verl_grpo_example_gsm8k_math' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

unsupported, ignored (3): no effect on the math
   actor_rollout_ref.actor.megatron.dtype = 'bfloat16': rlctl's megatron engine computes in model.dtype (float32 keeps verl's fp32 master weights; verl computes in bf16)
   actor_rollout_ref.actor.megatron.use_distributed_optimizer = true: rlctl's megatron engine keeps full optimizer state per data-parallel rank (memory, not math)
   trainer.val_before_train = true: rlctl validates every schedule.eval_every steps, not before the first (validation, not training)

dropped, set by the overrides (19): no effect in rlctl
 * actor_rollout_ref.actor.rollout_n = 5: copy of actor_rollout_ref.rollout.n (algorithm.group_size)
 * actor_rollout_ref.actor.use_fused_kernels = true: kernel choice
 * actor_rollout_ref.model.use_fused_kernels = true: kernel choice
 * actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 4: same as the rollout's log-prob micro-batch (rlctl has one)
 * actor_rollout_ref.ref.megatron.pipeline_model_parallel_size = 2: same as the actor's layout (one [engines.train.options])
 * actor_rollout_ref.ref.megatron.tensor_model_parallel_size = 2: same as the actor's layout (one [engines.train.options])
 * actor_rollout_ref.ref.rollout_n = 5: copy of actor_rollout_ref.rollout.n (algorithm.group_size)
 * actor_rollout_ref.rollout.mode = 'async': rlctl's rollout servers are always asynchronous
 * actor_rollout_ref.rollout.prometheus.served_model_name = 'Qwen/Qwen2-7B-Instruct': metrics export
 * actor_rollout_ref.rollout.prompt_length = 1024: same as data.max_prompt_length (rlctl has one prompt limit)
 * critic.model.tokenizer_path = 'Qwen/Qwen2-7B-Instruct': no critic in this run
 * critic.rollout_n = 5: no critic in this run
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 1024: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * data.return_raw_chat = true: dataset output format
 * data.truncation = 'error': error, as rlctl: over-long prompts are refused
 * reward_model.model.input_tokenizer = 'Qwen/Qwen2-7B-Instruct': reward models are off
 * trainer.critic_warmup = 0: no critic
 * trainer.default_local_dir = 'checkpoints/verl_grpo_example_gsm8k_math/qwen2_7b_megatron': rlctl writes checkpoints under run.output_dir/run.name

dropped at the YAML's values (549): no effect in rlctl
    105 no critic in this run
     75 profiling
     45 verl's dataclass to build: no meaning outside verl
     36 reward models are off
     19 LoRA is off
     14 at False
     13 multi-turn is off
     11 a copy of model.mtp (checked there)
     11 recompute detail (the granularity is mapped)
     10 multi-token prediction is off
      7 kernel choice
      6 rollout correction is off (rollout_is = null)
      6 see use_dist_checkpointing
      6 the KL is in the loss
      6 weight conversion route
      4 MoE router replay is off
      4 rlctl packs sequences its own way (no math effect)
      3 at 1
      3 at None
      3 at True
      3 at True (off): rlctl always loads the checkpoint's weights
      3 at {}
      3 dataset output format
      3 metrics export
      3 rlctl derives every seed from run.seed
      3 rollout tracing
      3 same as the actor's layout (one [engines.train.options])
      3 server batching (speed)
      3 token budget of dynamic batching (memory)
      3 used only by the clip_cov policy loss
      3 weight-sync transport
      3 what verl's checkpoints hold; rlctl saves model, optimizer and state
    126 for 104 other reasons
   (`--report FILE` lists each key with its reason)
""", 'ppo_critic': """\
verl config tests/cli/migrate_fixtures/ppo_trainer.yaml + 39 overrides (39 from ppo_critic_deepseek7b.sh)
   launch script tests/cli/migrate_fixtures/ppo_critic_deepseek7b.sh: main_ppo call at line 4
   the call forwards "$@": give extra overrides as arguments
   591 verl keys, 44 set by the overrides (*): 82 mapped, 507 dropped (no effect in rlctl), 2 unsupported but no effect on the math, 0 refused

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

mapped (82): verl key = value -> rlctl key
   actor_rollout_ref.actor.clip_ratio_c = 3.0 -> algorithm.loss.clip_ratio_c
   actor_rollout_ref.actor.clip_ratio_high = 0.2 -> algorithm.loss.clip_high
   actor_rollout_ref.actor.clip_ratio_low = 0.2 -> algorithm.loss.clip_low
   actor_rollout_ref.actor.entropy_coeff = 0 -> algorithm.loss.entropy_coef
   actor_rollout_ref.actor.fsdp_config.dtype = 'bfloat16' -> engines.train.options.mixed_precision
   actor_rollout_ref.actor.fsdp_config.model_dtype = 'fp32' -> model.dtype
   actor_rollout_ref.actor.fsdp_config.offload_policy = false -> engines.train.options.cpu_offload
 * actor_rollout_ref.actor.fsdp_config.optimizer_offload = false -> engines.train.options.cpu_offload
 * actor_rollout_ref.actor.fsdp_config.param_offload = false -> engines.train.options.cpu_offload
   actor_rollout_ref.actor.fsdp_config.reshard_after_forward = true -> engines.train.options.reshard_after_forward
   actor_rollout_ref.actor.fsdp_config.seed = 42 -> run.seed
   actor_rollout_ref.actor.grad_clip = 1.0 -> algorithm.optim.grad_clip
   actor_rollout_ref.actor.loss_agg_mode = 'token-mean' -> algorithm.loss.agg
   actor_rollout_ref.actor.optim.betas = [0.9, 0.999] -> algorithm.optim.betas
 * actor_rollout_ref.actor.optim.lr = 1e-06 -> algorithm.optim.lr
   actor_rollout_ref.actor.optim.lr_scheduler_type = 'constant' -> algorithm.optim.scheduler
   actor_rollout_ref.actor.optim.lr_warmup_steps = -1 -> algorithm.optim.warmup_steps
   actor_rollout_ref.actor.optim.lr_warmup_steps_ratio = 0.0 -> algorithm.optim.warmup_steps
   actor_rollout_ref.actor.optim.min_lr_ratio = 0.0 -> algorithm.optim.min_lr_ratio
   actor_rollout_ref.actor.optim.optimizer = 'AdamW' -> algorithm.optim.name
   actor_rollout_ref.actor.optim.weight_decay = 0.01 -> algorithm.optim.weight_decay
   actor_rollout_ref.actor.policy_loss.loss_mode = 'vanilla' -> algorithm.loss.policy_loss
   actor_rollout_ref.actor.ppo_epochs = 1 -> algorithm.epochs
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 16 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.ppo_mini_batch_size = 256 -> algorithm.minibatches
   actor_rollout_ref.actor.shuffle = false -> algorithm.shuffle_minibatches
   actor_rollout_ref.actor.strategy = 'fsdp' -> engines.train.backend
   actor_rollout_ref.actor.use_dynamic_bsz = false -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_kl_loss = false -> algorithm.kl.in
 * actor_rollout_ref.model.enable_gradient_checkpointing = true -> model.gradient_checkpointing
 * actor_rollout_ref.model.path = 'deepseek-ai/deepseek-llm-7b-chat' -> model.path
   actor_rollout_ref.model.tokenizer_path = null -> model.tokenizer
   actor_rollout_ref.model.trust_remote_code = false -> model.trust_remote_code
   actor_rollout_ref.rollout.agent.default_agent_loop = 'single_turn_agent' -> rollout.agent_loop
   actor_rollout_ref.rollout.agent.num_workers = 8 -> engines.rollout.agent_workers
   actor_rollout_ref.rollout.do_sample = true -> rollout.temperature
   actor_rollout_ref.rollout.enable_prefix_caching = true -> engines.rollout.options.enable_prefix_caching
   actor_rollout_ref.rollout.enforce_eager = false -> engines.rollout.options.enforce_eager
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.4 -> engines.rollout.options.gpu_memory_utilization
   actor_rollout_ref.rollout.ignore_eos = false -> engines.rollout.options.ignore_eos
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 32 -> engines.train.log_prob_micro_batch_size
   actor_rollout_ref.rollout.max_model_len = null -> engines.rollout.options.max_model_len
   actor_rollout_ref.rollout.n = 1 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
   actor_rollout_ref.rollout.response_length = 512 -> rollout.max_new_tokens
   actor_rollout_ref.rollout.temperature = 1.0 -> rollout.temperature
 * actor_rollout_ref.rollout.tensor_model_parallel_size = 4 -> engines.rollout.replicas
   actor_rollout_ref.rollout.top_k = -1 -> rollout.top_k
   actor_rollout_ref.rollout.top_p = 1 -> rollout.top_p
   actor_rollout_ref.rollout.val_kwargs.do_sample = false -> rollout.val_temperature
   actor_rollout_ref.rollout.val_kwargs.n = 1 -> rollout.val_group_size
   actor_rollout_ref.rollout.val_kwargs.temperature = 0 -> rollout.val_temperature
 * algorithm.adv_estimator = 'gae' -> algorithm.estimator
   algorithm.gamma = 1.0 -> algorithm.gamma
   algorithm.lam = 1.0 -> algorithm.lam
   algorithm.norm_adv_by_std_in_grpo = true -> algorithm.norm_adv_by_std
 * algorithm.use_kl_in_reward = false -> algorithm.kl.in
   critic.cliprange_value = 0.5 -> critic.cliprange_value
   critic.enable = null -> critic.enabled
 * critic.model.path = 'deepseek-ai/deepseek-llm-7b-chat' -> critic.path
 * critic.optim.lr = 1e-05 -> critic.lr
   critic.optim.lr_warmup_steps_ratio = 0.0 -> algorithm.optim.warmup_steps
   custom_reward_function.path = null -> rewards (--reward)
 * data.max_prompt_length = 512 -> data.max_prompt_tokens
   data.prompt_key = 'prompt' -> data.prompt_key
   data.shuffle = true -> data.shuffle
   data.tokenizer = null -> model.tokenizer
 * data.train_batch_size = 1024 -> algorithm.prompts_per_step
 * data.train_files = '/data/data/gsm8k/train.parquet' -> data.train
 * data.val_files = '/data/data/gsm8k/test.parquet' -> data.val
   ray_kwargs.ray_init.num_cpus = null -> resources.num_cpus
 * trainer.critic_warmup = 0 -> critic.warmup_steps
   trainer.device = 'cuda' -> run.device
 * trainer.experiment_name = 'deepseek_llm_7b_function_rm' -> run.name
 * trainer.logger = ['console', 'wandb'] -> logging.sinks
   trainer.max_actor_ckpt_to_keep = null -> schedule.keep_last
 * trainer.n_gpus_per_node = 8 -> resources.devices_per_node
 * trainer.nnodes = 1 -> resources.nodes
 * trainer.project_name = 'verl_example_gsm8k' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 1 -> schedule.eval_every
 * trainer.total_epochs = 15 -> schedule.total_steps

unsupported, ignored (2): no effect on the math
 * critic.ppo_micro_batch_size_per_gpu = 32: rlctl uses the actor's micro-batch size (engines.train.micro_batch_size) (16) here
   trainer.val_before_train = true: rlctl validates every schedule.eval_every steps, not before the first (validation, not training)

dropped, set by the overrides (14): no effect in rlctl
 * actor_rollout_ref.model.use_remove_padding = true: rlctl packs sequences its own way (no math effect)
 * actor_rollout_ref.rollout.prometheus.served_model_name = 'deepseek-ai/deepseek-llm-7b-chat': metrics export
 * critic.forward_micro_batch_size_per_gpu = 32: forward micro-batch (memory)
 * critic.model.enable_gradient_checkpointing = true: same as the policy's model.gradient_checkpointing
 * critic.model.fsdp_config.optimizer_offload = false: same as the actor's engine options (one [engines.train.options])
 * critic.model.fsdp_config.param_offload = false: same as the actor's engine options (one [engines.train.options])
 * critic.model.tokenizer_path = 'deepseek-ai/deepseek-llm-7b-chat': the policy's tokenizer
 * critic.model.use_remove_padding = true: rlctl packs sequences its own way (no math effect)
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 512: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * data.truncation = 'error': error, as rlctl: over-long prompts are refused
 * reward_model.model.input_tokenizer = 'deepseek-ai/deepseek-llm-7b-chat': reward models are off
 * trainer.default_local_dir = 'checkpoints/verl_example_gsm8k/deepseek_llm_7b_function_rm': rlctl writes checkpoints under run.output_dir/run.name
 * trainer.use_legacy_worker_impl = 'auto': which verl worker code runs

dropped at the YAML's values (493): no effect in rlctl
     89 profiling
     56 verl's dataclass to build: no meaning outside verl
     31 reward models are off
     13 memory saving
     13 multi-turn is off
     11 a copy of model.mtp (checked there)
     10 at 1
     10 kernel choice
     10 multi-token prediction is off
      9 at False
      8 the KL is off
      6 LoRA is off
      6 rollout correction is off (rollout_is = null)
      6 same as the actor's engine options (one [engines.train.options])
      6 what verl's checkpoints hold; rlctl saves model, optimizer and state
      5 at -1
      5 token budget of dynamic batching (memory)
      4 MoE router replay is off
      4 dataset output format
      4 model loading detail
      4 overlap tuning
      4 rlctl derives every seed from run.seed
      4 rlctl shards per decoder layer
      3 FSDP1 detail
      3 at None (off): Python imported into verl's workers
      3 at {}
      3 at {} (off): overrides of the model's config
      3 copy of actor_rollout_ref.rollout.n (algorithm.group_size)
      3 copy of the role's strategy
      3 metrics export
      3 rollout tracing
      3 server batching (speed)
      3 set by verl per role
      3 unset (the per-GPU size is used)
      3 used only by the clip_cov policy loss
      3 weight-sync transport
    136 for 112 other reasons
   (`--report FILE` lists each key with its reason)
""", 'ppo_moe': """\
verl config tests/cli/migrate_fixtures/ppo_megatron_trainer.yaml + 45 overrides (45 from ppo_moe_qwen1.5_megatron.sh)
   launch script tests/cli/migrate_fixtures/ppo_moe_qwen1.5_megatron.sh: main_ppo call at line 28
   the call forwards "$@": give extra overrides as arguments
   651 verl keys, 50 set by the overrides (*): 83 mapped, 562 dropped (no effect in rlctl), 6 unsupported but no effect on the math, 0 refused

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

mapped (83): verl key = value -> rlctl key
   actor_rollout_ref.actor.clip_ratio_c = 3.0 -> algorithm.loss.clip_ratio_c
   actor_rollout_ref.actor.clip_ratio_high = 0.2 -> algorithm.loss.clip_high
   actor_rollout_ref.actor.clip_ratio_low = 0.2 -> algorithm.loss.clip_low
   actor_rollout_ref.actor.entropy_coeff = 0 -> algorithm.loss.entropy_coef
   actor_rollout_ref.actor.loss_agg_mode = 'token-mean' -> algorithm.loss.agg
 * actor_rollout_ref.actor.megatron.context_parallel_size = 1 -> engines.train.options.context_parallel
   actor_rollout_ref.actor.megatron.expert_model_parallel_size = 1 -> engines.train.options.expert_parallel
   actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity = null -> engines.train.options.recompute_granularity
 * actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 2 -> engines.train.options.pipeline_parallel
   actor_rollout_ref.actor.megatron.seed = 42 -> run.seed
   actor_rollout_ref.actor.megatron.sequence_parallel = true -> engines.train.options.sequence_parallel
 * actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 4 -> engines.train.options.tensor_parallel
   actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size = null -> engines.train.options.virtual_pipeline_parallel
   actor_rollout_ref.actor.optim.betas = [0.9, 0.999] -> algorithm.optim.betas
   actor_rollout_ref.actor.optim.clip_grad = 1.0 -> algorithm.optim.grad_clip
 * actor_rollout_ref.actor.optim.lr = 1e-06 -> algorithm.optim.lr
   actor_rollout_ref.actor.optim.lr_decay_style = 'constant' -> algorithm.optim.scheduler
   actor_rollout_ref.actor.optim.lr_warmup_steps = -1 -> algorithm.optim.warmup_steps
   actor_rollout_ref.actor.optim.lr_warmup_steps_ratio = 0.0 -> algorithm.optim.warmup_steps
   actor_rollout_ref.actor.optim.min_lr = 0.0 -> algorithm.optim.min_lr_ratio
   actor_rollout_ref.actor.optim.optimizer = 'adam' -> algorithm.optim.name
   actor_rollout_ref.actor.optim.weight_decay = 0.01 -> algorithm.optim.weight_decay
   actor_rollout_ref.actor.policy_loss.loss_mode = 'vanilla' -> algorithm.loss.policy_loss
   actor_rollout_ref.actor.ppo_epochs = 1 -> algorithm.epochs
 * actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4 -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.ppo_mini_batch_size = 256 -> algorithm.minibatches
   actor_rollout_ref.actor.shuffle = false -> algorithm.shuffle_minibatches
   actor_rollout_ref.actor.strategy = 'megatron' -> engines.train.backend
   actor_rollout_ref.actor.use_dynamic_bsz = false -> engines.train.micro_batch_size
 * actor_rollout_ref.actor.use_kl_loss = false -> algorithm.kl.in
   actor_rollout_ref.model.enable_gradient_checkpointing = true -> model.gradient_checkpointing
 * actor_rollout_ref.model.path = '/data/models/Qwen/Qwen1.5-MoE-A2.7B-Chat' -> model.path
   actor_rollout_ref.model.tokenizer_path = null -> model.tokenizer
   actor_rollout_ref.model.trust_remote_code = false -> model.trust_remote_code
   actor_rollout_ref.rollout.agent.default_agent_loop = 'single_turn_agent' -> rollout.agent_loop
   actor_rollout_ref.rollout.agent.num_workers = 8 -> engines.rollout.agent_workers
   actor_rollout_ref.rollout.do_sample = true -> rollout.temperature
   actor_rollout_ref.rollout.enable_prefix_caching = true -> engines.rollout.options.enable_prefix_caching
   actor_rollout_ref.rollout.enforce_eager = false -> engines.rollout.options.enforce_eager
 * actor_rollout_ref.rollout.gpu_memory_utilization = 0.7 -> engines.rollout.options.gpu_memory_utilization
   actor_rollout_ref.rollout.ignore_eos = false -> engines.rollout.options.ignore_eos
 * actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 2 -> engines.train.log_prob_micro_batch_size
   actor_rollout_ref.rollout.max_model_len = null -> engines.rollout.options.max_model_len
   actor_rollout_ref.rollout.n = 1 -> algorithm.group_size
 * actor_rollout_ref.rollout.name = 'vllm' -> engines.rollout.backend
   actor_rollout_ref.rollout.response_length = 512 -> rollout.max_new_tokens
   actor_rollout_ref.rollout.temperature = 1.0 -> rollout.temperature
 * actor_rollout_ref.rollout.tensor_model_parallel_size = 4 -> engines.rollout.replicas
   actor_rollout_ref.rollout.top_k = -1 -> rollout.top_k
   actor_rollout_ref.rollout.top_p = 1 -> rollout.top_p
   actor_rollout_ref.rollout.val_kwargs.do_sample = false -> rollout.val_temperature
   actor_rollout_ref.rollout.val_kwargs.n = 1 -> rollout.val_group_size
   actor_rollout_ref.rollout.val_kwargs.temperature = 0 -> rollout.val_temperature
 * algorithm.adv_estimator = 'gae' -> algorithm.estimator
   algorithm.gamma = 1.0 -> algorithm.gamma
   algorithm.lam = 1.0 -> algorithm.lam
   algorithm.norm_adv_by_std_in_grpo = true -> algorithm.norm_adv_by_std
 * algorithm.use_kl_in_reward = false -> algorithm.kl.in
   critic.cliprange_value = 0.5 -> critic.cliprange_value
   critic.enable = null -> critic.enabled
 * critic.model.path = '/data/models/Qwen/Qwen1.5-MoE-A2.7B-Chat' -> critic.path
 * critic.optim.lr = 1e-05 -> critic.lr
   critic.optim.lr_warmup_steps_ratio = 0.0 -> algorithm.optim.warmup_steps
   custom_reward_function.path = null -> rewards (--reward)
 * data.max_prompt_length = 1024 -> data.max_prompt_tokens
   data.prompt_key = 'prompt' -> data.prompt_key
   data.shuffle = true -> data.shuffle
   data.tokenizer = null -> model.tokenizer
 * data.train_batch_size = 1024 -> algorithm.prompts_per_step
 * data.train_files = '/data/data/gsm8k/train.parquet' -> data.train
 * data.val_files = '/data/data/gsm8k/test.parquet' -> data.val
   ray_kwargs.ray_init.num_cpus = null -> resources.num_cpus
 * trainer.critic_warmup = 0 -> critic.warmup_steps
   trainer.device = 'cuda' -> run.device
 * trainer.experiment_name = 'qwen1.5_moe_nochat' -> run.name
 * trainer.logger = ['console', 'wandb'] -> logging.sinks
   trainer.max_actor_ckpt_to_keep = null -> schedule.keep_last
 * trainer.n_gpus_per_node = 8 -> resources.devices_per_node
 * trainer.nnodes = 4 -> resources.nodes
 * trainer.project_name = 'verl_megatron_gsm8k_examples' -> logging.sink_options
 * trainer.save_freq = 20 -> schedule.save_every
 * trainer.test_freq = 5 -> schedule.eval_every
 * trainer.total_epochs = 100 -> schedule.total_steps

unsupported, ignored (6): no effect on the math
   actor_rollout_ref.actor.megatron.dtype = 'bfloat16': rlctl's megatron engine computes in model.dtype (float32 keeps verl's fp32 master weights; verl computes in bf16)
 * actor_rollout_ref.actor.megatron.use_dist_checkpointing = true: True: rlctl loads the HF weights at model.path (make sure the dist checkpoint holds the same weights); rlctl lacks it (no effect on the math)
   actor_rollout_ref.actor.megatron.use_distributed_optimizer = true: rlctl's megatron engine keeps full optimizer state per data-parallel rank (memory, not math)
 * actor_rollout_ref.ref.megatron.use_dist_checkpointing = true: True: rlctl loads the HF weights at model.path (make sure the dist checkpoint holds the same weights); rlctl lacks it (no effect on the math)
 * critic.megatron.use_dist_checkpointing = true: True: rlctl loads the HF weights at model.path (make sure the dist checkpoint holds the same weights); rlctl lacks it (no effect on the math)
   trainer.val_before_train = true: rlctl validates every schedule.eval_every steps, not before the first (validation, not training)

dropped, set by the overrides (18): no effect in rlctl
 * actor_rollout_ref.actor.megatron.dist_checkpointing_path = '/data/mcore_ckpt/Qwen1.5-MoE-A2.7B-Chat': see use_dist_checkpointing
 * actor_rollout_ref.ref.megatron.context_parallel_size = 1: same as the actor's layout (one [engines.train.options])
 * actor_rollout_ref.ref.megatron.dist_checkpointing_path = '/data/mcore_ckpt/Qwen1.5-MoE-A2.7B-Chat': see use_dist_checkpointing
 * actor_rollout_ref.ref.megatron.pipeline_model_parallel_size = 2: same as the actor's layout (one [engines.train.options])
 * actor_rollout_ref.ref.megatron.tensor_model_parallel_size = 4: same as the actor's layout (one [engines.train.options])
 * actor_rollout_ref.rollout.prometheus.served_model_name = '/data/models/Qwen/Qwen1.5-MoE-A2.7B-Chat': metrics export
 * actor_rollout_ref.rollout.prompt_length = 1024: same as data.max_prompt_length (rlctl has one prompt limit)
 * critic.megatron.context_parallel_size = 1: same as the actor's layout (one [engines.train.options])
 * critic.megatron.dist_checkpointing_path = '/data/mcore_ckpt/Qwen1.5-MoE-A2.7B-Chat': see use_dist_checkpointing
 * critic.megatron.pipeline_model_parallel_size = 2: same as the actor's layout (one [engines.train.options])
 * critic.megatron.tensor_model_parallel_size = 4: same as the actor's layout (one [engines.train.options])
 * critic.model.tokenizer_path = '/data/models/Qwen/Qwen1.5-MoE-A2.7B-Chat': the policy's tokenizer
 * critic.ppo_micro_batch_size_per_gpu = 4: same as the actor's micro-batch size (engines.train.micro_batch_size)
 * data.filter_overlong_prompts = true: rlctl refuses over-long prompts when it loads them instead of filtering them out (a dataset without any trains the same)
 * data.max_response_length = 512: same as actor_rollout_ref.rollout.response_length (what verl's rollout uses)
 * data.truncation = 'error': error, as rlctl: over-long prompts are refused
 * reward_model.model.input_tokenizer = '/data/models/Qwen/Qwen1.5-MoE-A2.7B-Chat': reward models are off
 * trainer.default_local_dir = 'checkpoints/verl_megatron_gsm8k_examples/qwen1.5_moe_noc...: rlctl writes checkpoints under run.output_dir/run.name

dropped at the YAML's values (544): no effect in rlctl
     89 profiling
     55 verl's dataclass to build: no meaning outside verl
     36 reward models are off
     33 LoRA is off
     15 at False
     15 recompute detail (the granularity is mapped)
     13 multi-turn is off
     11 a copy of model.mtp (checked there)
     10 kernel choice
     10 multi-token prediction is off
      8 the KL is off
      8 weight conversion route
      6 rollout correction is off (rollout_is = null)
      6 what verl's checkpoints hold; rlctl saves model, optimizer and state
      5 at True
      5 rlctl derives every seed from run.seed
      5 rlctl packs sequences its own way (no math effect)
      5 see use_dist_checkpointing
      5 token budget of dynamic batching (memory)
      4 MoE router replay is off
      4 at None
      4 at True (off): rlctl always loads the checkpoint's weights
      4 dataset output format
      4 same as the actor's layout (one [engines.train.options])
      4 used only by the WSD schedule
      3 at 0 (off): LoRA: rlctl trains all weights
      3 at 1
      3 at None (off): Python imported into verl's workers
      3 at {}
      3 at {} (off): a DDP override rlctl cannot apply
      3 at {} (off): a model-config override rlctl cannot apply
      3 at {} (off): overrides of the model's config
      3 compute dtype of a non-actor role: rlctl uses the actor's
      3 copy of actor_rollout_ref.rollout.n (algorithm.group_size)
      3 metrics export
      3 rlctl's collectives have their own bounds
      3 rollout tracing
      3 server batching (speed)
      3 set by verl per role
      3 unset (the per-GPU size is used)
      3 used only by the clip_cov policy loss
      3 weight-sync transport
    129 for 106 other reasons
   (`--report FILE` lists each key with its reason)
"""})[case]
    assert _clean(out.read_text(), tmp_path) == snapshot({'grpo_fsdp': """\
# qwen2_7b_function_rm: migrated from verl by `rlctl config migrate`.
#
# verl run:  grpo on Qwen/Qwen2-7B-Instruct, fsdp training + vllm rollout on 8 GPUs
# Made by:   rlctl config migrate tests/cli/migrate_fixtures/ppo_trainer.yaml --verl-script tests/cli/migrate_fixtures/grpo_fsdp_qwen2-7b.sh --var HOME=/data --reward gsm8k --train-rows 7473 -o <tmp>/grpo_fsdp.toml
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
agent_workers = 8                       # rollout.agent.num_workers
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
# Made by:   rlctl config migrate tests/cli/migrate_fixtures/ppo_megatron_trainer.yaml --verl-script tests/cli/migrate_fixtures/grpo_megatron_qwen2-7b_math.sh --var HOME=/data --reward gsm8k --train-rows 7473 -o <tmp>/grpo_megatron.toml
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
agent_workers = 8                       # rollout.agent.num_workers
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
# Made by:   rlctl config migrate tests/cli/migrate_fixtures/ppo_trainer.yaml --verl-script tests/cli/migrate_fixtures/ppo_critic_deepseek7b.sh --var HOME=/data --reward gsm8k --train-rows 7473 -o <tmp>/ppo_critic.toml
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
agent_workers = 8                       # rollout.agent.num_workers
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
# Made by:   rlctl config migrate tests/cli/migrate_fixtures/ppo_megatron_trainer.yaml --verl-script tests/cli/migrate_fixtures/ppo_moe_qwen1.5_megatron.sh --var HOME=/data --reward gsm8k --train-rows 7473 -o <tmp>/ppo_moe.toml
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

    listed = {line.split(" = ", 1)[0].strip(" *") for line in text.splitlines()
              if line.startswith(("   ", " * ")) and " = " in line}
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
  trainer.total_epochs: 10 epochs: verl runs epochs x (training rows // data.train_batch_size) steps, and the row count is unknown
      fix: pass --train-rows N (rows of the training set), or set trainer.total_training_steps
  actor_rollout_ref.actor.optim.lr_warmup_steps: verl steps the learning-rate schedule once per training step, rlctl once per optimizer step, and this recipe makes 4 optimizer steps per training step: the warm-up / decay would not match
      fix: use a constant schedule without warm-up, or one minibatch and one epoch
  actor_rollout_ref.model.override_config.model_config.max_position_embeddings: 10240: an override of the model's config, which rlctl cannot reproduce
      fix: remove the override, or keep this run on verl
""")
    assert "   $NNODES unset: the script's default '1' (--var NNODES=... to change it)" \
        in result.stdout


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("algorithm.adv_estimator=ppo_magic", "algorithm.adv_estimator"),
        ("actor_rollout_ref.actor.policy_loss.loss_mode=mystery", "actor_rollout_ref.actor.policy_loss.loss_mode"),
        ("actor_rollout_ref.actor.kl_loss_type=k3+", "actor_rollout_ref.actor.kl_loss_type"),
        ("actor_rollout_ref.actor.ppo_mini_batch_size=300", "actor_rollout_ref.actor.ppo_mini_batch_size"),
        ("algorithm.use_kl_in_reward=true", "actor_rollout_ref.actor.use_kl_loss"),
        ("actor_rollout_ref.model.lora_rank=16", "actor_rollout_ref.model.lora_rank"),
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
    assert "custom_reward_function.path: unset: verl scores with its built-in reward" in result.stderr
    assert "pass --reward NAME" in result.stderr


def test_unknown_epoch_length_is_asked_for(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "x.toml"
    result = rlctl("config", "migrate", FSDP, "--verl-script", str(FIX / "grpo_fsdp_qwen2-7b.sh"),
                   "--var", "HOME=/data", "--reward", "gsm8k", "-o", str(out), code=2)
    assert "trainer.total_epochs: 15 epochs" in result.stderr and "--train-rows" in result.stderr


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
