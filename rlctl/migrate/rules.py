"""verl keys the translators do not read: each has no effect in rlctl, or only at one value.

A rule is a glob over the dotted key (``*`` crosses dots) and one of

* ``drop(reason)`` - no effect here, whatever the value (profiling, kernels, checkpoint
  plumbing, verl's dataclass targets);
* ``only(values, reason)`` - fine at those values (the feature is off); any other value
  changes the math and rlctl lacks the feature: exit 2;
* ``perf(values, reason)`` - fine at those values; any other value is reported as ignored
  (a memory or speed setting rlctl lacks, which leaves the math alone).

The first matching rule wins, so specific patterns come before general ones. A key that no
rule matches and no translator read is *unknown* (a newer verl?): with an off-like value
(null, false, 0, empty) it is assumed to be off, otherwise the migration stops on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from rlctl.migrate.ledger import Ledger


@dataclass(frozen=True)
class Rule:
    pattern: str
    kind: Literal["drop", "only", "perf"]
    reason: str
    values: tuple[Any, ...] = ()


def drop(pattern: str, reason: str) -> Rule:
    return Rule(pattern, "drop", reason)


def only(pattern: str, values: tuple[Any, ...], reason: str) -> Rule:
    return Rule(pattern, "only", reason, values)


def perf(pattern: str, values: tuple[Any, ...], reason: str) -> Rule:
    return Rule(pattern, "perf", reason, values)


OFF = (None, False, 0, "", {}, [])
MEGATRON_LORA = ("verl's Megatron LoRA (model.lora.*, Megatron module names): rlctl's megatron "
                 "engine has no LoRA path (its fsdp engine trains LoRA from model.lora_rank)")
NOTHING = "no effect in rlctl"

RULES: tuple[Rule, ...] = (
    # verl plumbing
    drop("*._target_", "verl's dataclass to build: no meaning outside verl"),
    drop("*.profiler.*", "profiling"),
    drop("global_profiler.*", "profiling"),
    drop("*.prometheus.*", "metrics export"),
    drop("*.trace.*", "rollout tracing"),
    drop("*.checkpoint.*", "what verl's checkpoints hold; rlctl saves model, optimizer and state"),
    drop("*.rollout_n", "copy of actor_rollout_ref.rollout.n (algorithm.group_size)"),
    drop("*.use_remove_padding", "rlctl packs sequences its own way (no math effect)"),
    drop("*.use_fused_kernels", "kernel choice"),
    drop("*.fused_kernel_options.*", "kernel choice"),
    drop("*.use_torch_compile", "kernel choice"),
    drop("*.entropy_from_logits_with_chunking", "memory saving"),
    drop("*.entropy_checkpointing", "memory saving"),
    drop("*.use_liger", "kernel choice"),
    drop("*.use_shm", "model loading detail"),
    drop("*.forward_only", "set by verl per role"),
    drop("*.data_loader_seed", "rlctl derives every seed from run.seed"),
    drop("*.fsdp_config.seed", "rlctl derives every seed from run.seed"),
    drop("*.megatron.seed", "rlctl derives every seed from run.seed"),
    drop("*.fsdp_config.strategy", "copy of the role's strategy"),
    drop("*.fsdp_config.dtype", "compute dtype of a non-actor role: rlctl uses the actor's"),
    drop("*.fsdp_config.model_dtype", "parameter dtype of a non-actor role: model.dtype"),
    drop("*.fsdp_config.wrap_policy.*", "rlctl shards per decoder layer"),
    drop("*.fsdp_config.use_orig_params", "FSDP1 detail"),
    drop("*.fsdp_config.forward_prefetch", "overlap tuning"),
    perf("*.fsdp_config.fsdp_size", (-1,), "rlctl shards over all ranks (no HSDP)"),
    perf("*.fsdp_config.full_determinism", (False,), "determinism switch"),
    perf("*.fsdp_config.param_offload", (False,), "offload (memory)"),
    perf("*.fsdp_config.optimizer_offload", (False,), "offload (memory)"),
    perf("*.fsdp_config.offload_policy", (False,), "offload (memory)"),
    perf("*.ulysses_sequence_parallel_size", (1,), "Ulysses sequence parallelism (memory; "
         "rlctl's data parallelism covers the GPUs instead)"),
    perf("*.megatron.*_offload", (False,), "offload (memory)"),
    drop("*.megatron.use_mbridge", "weight conversion route"),
    drop("*.megatron.vanilla_mbridge", "weight conversion route"),
    perf("*.megatron.use_dist_checkpointing", (False,), "rlctl loads the HF weights at "
         "model.path (make sure the dist checkpoint holds the same weights)"),
    drop("*.megatron.dist_checkpointing_path", "see use_dist_checkpointing"),
    drop("*.megatron.dist_checkpointing_prefix", "see use_dist_checkpointing"),
    only("*.megatron.override_ddp_config", ({},), "a DDP override rlctl cannot apply"),
    drop("*.megatron.override_transformer_config.recompute_*", "recompute detail (the "
         "granularity is mapped)"),
    drop("*.megatron.override_transformer_config.attention_backend", "kernel choice"),
    drop("*.megatron.override_transformer_config.*_fusion", "kernel fusion"),
    drop("*.megatron.override_transformer_config.moe_grouped_gemm", "MoE kernel choice"),
    drop("*.megatron.override_transformer_config.moe_token_dispatcher_type", "MoE dispatch"),
    drop("*.megatron.override_transformer_config.moe_enable_deepep", "MoE dispatch"),
    drop("*.megatron.override_transformer_config.deallocate_pipeline_outputs", "memory"),
    drop("*.megatron.override_transformer_config.persist_layer_norm", "kernel choice"),
    drop("*.megatron.override_transformer_config.moe_router_dtype", "router precision"),
    only("actor_rollout_ref.actor.megatron.override_transformer_config.*", OFF,
         "a transformer-config override that may change the model"),
    drop("*.megatron.override_transformer_config.*", "a per-role copy (the actor's is read)"),
    only("*.megatron.override_mcore_model_config", ({},), "a model-config override rlctl "
         "cannot apply"),
    drop("*.megatron.dtype", "compute dtype of a non-actor role: rlctl uses the actor's"),
    perf("*.megatron.sequence_parallel", (True, False), "per-role copy: the actor's is mapped"),
    perf("*.megatron.use_distributed_optimizer", (True, False), "the actor's is reported"),
    perf("*.megatron.expert_tensor_parallel_size", (None, 1), "no expert tensor parallelism"),
    perf("*.megatron.override_transformer_config", ({},), "per-role copy: the actor's is read"),
    only("*.load_weight", (True,), "rlctl always loads the checkpoint's weights"),
    drop("*.nccl_timeout", "rlctl's collectives have their own bounds"),
    # actor / critic features rlctl lacks
    only("*.freeze_vision_tower", (False,), "vision towers are not trained by rlctl"),
    only("*.router_replay.mode", ("disabled",), "MoE router replay"),
    drop("*.router_replay.*", "MoE router replay is off"),
    drop("*.calculate_entropy", "metrics only: rlctl always logs the entropy"),
    perf("*.use_prefix_grouper", (False,), "shared-prefix forward (speed)"),
    drop("*.calculate_sum_pi_squared", "rlctl computes what its estimator needs"),
    drop("*.sum_pi_squared_checkpointing", "memory saving"),
    drop("*.use_rollout_log_probs", "off-policy variant switch of verl's async trainer"),
    drop("actor_rollout_ref.ref.log_prob_use_dynamic_bsz", "rlctl packs forwards by sample count"),
    drop("*.log_prob_use_dynamic_bsz", "rlctl packs forwards by sample count"),
    drop("*.log_prob_max_token_len_per_gpu", "token budget of dynamic batching (memory)"),
    drop("*.forward_max_token_len_per_gpu", "token budget of dynamic batching (memory)"),
    drop("*.ppo_max_token_len_per_gpu", "token budget of dynamic batching (memory)"),
    drop("*.use_dynamic_bsz", "the actor's is mapped; rlctl has one setting"),
    drop("*.log_prob_micro_batch_size", "unset (the per-GPU size is used)"),
    drop("*.log_prob_micro_batch_size_per_gpu", "unset"),
    drop("*.ppo_micro_batch_size", "unset (the per-GPU size is used)"),
    drop("*.forward_micro_batch_size", "forward micro-batch (memory)"),
    drop("*.forward_micro_batch_size_per_gpu", "forward micro-batch (memory)"),
    drop("*.strategy", "the actor's strategy is mapped"),
    drop("*.shuffle", "the actor's minibatch shuffle is mapped"),
    drop("*.grad_clip", "the actor's is mapped"),
    drop("*.optim.*", "the critic's optimizer is compared with the actor's"),
    drop("*.tau_pos", "used only by sapo"),
    drop("*.tau_neg", "used only by sapo"),
    drop("*.use_kl_loss", "a per-role copy"),
    # model
    # (the actor's lora_rank > 0 is mapped to [model.lora] by translate_lora)
    drop("actor_rollout_ref.model.lora_rank", "LoRA is off"),
    only("critic.model.lora_rank", (0,), "LoRA on the critic: rlctl's critic trains every "
         "weight"),
    drop("*.lora_alpha", "LoRA is off"),
    drop("*.target_modules", "LoRA is off"),
    drop("*.exclude_modules", "LoRA is off"),
    drop("*.lora_adapter_path", "LoRA is off"),
    only("*.model.lora.rank", (0,), MEGATRON_LORA),
    drop("*.model.lora.*", "verl's Megatron LoRA is off"),
    only("*.model.custom_chat_template", (None,), "a chat template other than the tokenizer's "
         "changes the prompts"),
    only("*.model.external_lib", (None,), "Python imported into verl's workers"),
    only("*.model.hf_config_path", (None,), "a config other than the checkpoint's"),
    only("*.model.override_config", ({},), "overrides of the model's config"),
    only("*.model.override_config.model_config", ({},), "overrides of the model's config"),
    only("*.model.override_config.moe_config.freeze_moe_router", (False,), "a frozen router"),
    only("*.model.override_config.*", OFF, "an override of the model's config"),
    drop("*.model.tokenizer_path", "the policy's tokenizer"),
    drop("*.model.trust_remote_code", "the policy's setting"),
    perf("*.model.enable_activation_offload", (False,), "offload (memory)"),
    perf("*.model.tiled_mlp.enabled", (False,), "memory saving"),
    drop("*.model.tiled_mlp.num_shards", "memory saving"),
    only("*.model.mtp.enable", (False,), "multi-token prediction"),
    drop("*.model.mtp.*", "multi-token prediction is off"),
    drop("*.model.enable_gradient_checkpointing", "the policy's setting is mapped"),
    drop("*.model.fsdp_config.*", "the actor's engine options apply to every role"),
    drop("*.model.path", "the policy's path"),
    # rollout
    drop("actor_rollout_ref.rollout.mode", "rlctl's rollout servers are always asynchronous"),
    drop("actor_rollout_ref.rollout.dtype", "rlctl's rollout runs in model.dtype"),
    drop("actor_rollout_ref.rollout.free_cache_engine", "KV-cache memory management"),
    drop("actor_rollout_ref.rollout.cudagraph_capture_sizes", "CUDA-graph tuning"),
    drop("actor_rollout_ref.rollout.load_format", "weights come from the trainer's sync"),
    drop("actor_rollout_ref.rollout.max_num_batched_tokens", "server batching (speed)"),
    drop("actor_rollout_ref.rollout.max_num_seqs", "server batching (speed)"),
    drop("actor_rollout_ref.rollout.enable_chunked_prefill", "server batching (speed)"),
    drop("actor_rollout_ref.rollout.disable_log_stats", "server logging"),
    drop("actor_rollout_ref.rollout.scheduling_policy", "server scheduling (speed)"),
    drop("actor_rollout_ref.rollout.logprobs_mode", "rlctl's engines return processed log-probs"),
    drop("actor_rollout_ref.rollout.multi_stage_wake_up", "memory management"),
    drop("actor_rollout_ref.rollout.layered_summon", "weight-sync detail"),
    drop("actor_rollout_ref.rollout.layer_name_map.*", "weight-sync detail"),
    drop("actor_rollout_ref.rollout.checkpoint_engine.*", "weight-sync transport"),
    drop("actor_rollout_ref.rollout.calculate_log_probs", "rlctl's engines return log-probs"),
    drop("actor_rollout_ref.rollout.skip_tokenizer_init", "server start-up detail"),
    drop("actor_rollout_ref.rollout.skip_dump_dir", "skip_rollout is off"),
    only("actor_rollout_ref.rollout.skip_rollout", (False,), "replaying dumped rollouts"),
    drop("actor_rollout_ref.rollout.mtp", "multi-token prediction is off"),
    drop("actor_rollout_ref.rollout.mtp.*", "a copy of model.mtp (checked there)"),
    only("actor_rollout_ref.rollout.over_sample_rate", (0, 0.0), "over-sampling changes which "
         "responses train"),
    only("actor_rollout_ref.rollout.enable_rollout_routing_replay", (False,), "MoE routing replay"),
    only("actor_rollout_ref.rollout.quantization", (None,), "quantised rollout changes sampling"),
    drop("actor_rollout_ref.rollout.quantization_config_file", "quantisation is off"),
    perf("actor_rollout_ref.rollout.data_parallel_size", (1,), "rollout layout"),
    perf("actor_rollout_ref.rollout.expert_parallel_size", (1,), "rollout layout"),
    perf("actor_rollout_ref.rollout.pipeline_model_parallel_size", (1,), "rollout layout"),
    perf("actor_rollout_ref.rollout.moe_tensor_parallel_size", (None, 1), "rollout layout (the "
         "experts' tensor parallelism in the rollout server)"),
    perf("actor_rollout_ref.rollout.engine_kwargs.*", ({}, None), "extra engine arguments "
         "(pass them in [engines.rollout.options] extra_args)"),
    only("actor_rollout_ref.rollout.agent.agent_loop_config_path", (None,), "custom agent loops"),
    only("actor_rollout_ref.rollout.agent.custom_async_server.*", (None,), "a custom server"),
    # data
    drop("data.use_shm", "loading detail"),
    only("data.train_max_samples", (-1, None), "a subset of the training set"),
    perf("data.val_max_samples", (-1, None), "a subset of the validation set"),
    drop("data.val_batch_size", "validation batching"),
    only("data.tool_config_path", (None,), "tools"),
    drop("data.return_raw_input_ids", "dataset output format"),
    drop("data.return_raw_chat", "dataset output format"),
    drop("data.return_full_prompt", "dataset output format"),
    drop("data.return_multi_modal_inputs", "dataset output format"),
    drop("data.dataloader_num_workers", "loading speed"),
    drop("data.filter_overlong_prompts_workers", "loading speed"),
    drop("data.image_patch_size", "multi-modal data"),
    drop("data.image_key", "multi-modal data (not in rlctl)"),
    drop("data.video_key", "multi-modal data (not in rlctl)"),
    drop("data.validation_shuffle", "validation order"),
    drop("data.trust_remote_code", "the model's setting"),
    only("data.custom_cls.path", (None,), "a custom dataset class"),
    drop("data.custom_cls.name", "no custom dataset class"),
    only("data.sampler.class_path", (None,), "a custom sampler (curriculum)"),
    drop("data.sampler.class_name", "no custom sampler"),
    only("data.datagen.path", (None,), "generated data"),
    drop("data.datagen.name", "no generated data"),
    only("data.apply_chat_template_kwargs", ({},), "chat-template arguments change the prompts"),
    # rewards
    # (reward_model.enable / .model.*, the dapo manager and its overlong buffer are mapped
    # by translate_reward_model and translate_dapo; these are what is left)
    only("reward_model.reward_manager", ("naive",), "reward shaping by this reward manager "
         "(naive and dapo are mapped)"),
    only("reward_model.reward_kwargs.*", OFF, "reward-manager arguments (the dapo manager's "
         "overlong_buffer_cfg and max_resp_len are mapped)"),
    only("reward_model.reward_kwargs", ({},), "reward-manager arguments"),
    only("reward_manager.name", ("naive",), "reward shaping by this reward manager"),
    only("reward_model.reward_loop_module_path", (None,), "a custom reward loop"),
    drop("reward_model.reward_loop_source", "no custom reward loop"),
    drop("reward_model.reward_loop_class_name", "no custom reward loop"),
    only("reward_manager.source", ("register",), "a custom reward manager"),
    only("reward_manager.module.path", (None,), "a custom reward manager"),
    drop("reward_manager.module.name", "no custom reward manager"),
    only("reward_model.sandbox_fusion.url", (None,), "sandboxed code execution"),
    drop("reward_model.launch_reward_fn_async", "reward scheduling (speed)"),
    drop("reward_model.*", "reward models are off"),
    # verl v0.7.1+ keeps them under reward.* (the legacy keys above are copied there)
    only("reward.reward_manager.name", ("naive",), "reward shaping by this reward manager "
         "(naive and dapo are mapped)"),
    only("reward.reward_kwargs.*", OFF, "reward-manager arguments (the dapo manager's "
         "overlong_buffer_cfg and max_resp_len are mapped)"),
    only("reward.reward_kwargs", ({},), "reward-manager arguments"),
    only("reward.reward_manager.source", ("register",), "a custom reward manager"),
    only("reward.reward_manager.module.path", (None,), "a custom reward manager"),
    drop("reward.reward_manager.module.name", "no custom reward manager"),
    only("reward.sandbox_fusion.url", (None,), "sandboxed code execution"),
    drop("reward.sandbox_fusion.*", "sandboxed code execution is off"),
    drop("reward.reward_model.*", "the reward model is off"),
    drop("reward.num_workers", "reward workers (speed)"),
    drop("algorithm.filter_groups._target_", "verl's dataclass to build"),
    # algorithm
    only("algorithm.use_pf_ppo", (False,), "preference-feedback PPO re-weighting"),
    drop("algorithm.pf_ppo.*", "pf_ppo is off"),
    # trainer & infrastructure
    drop("trainer.balance_batch", "rlctl balances sequence lengths over ranks itself"),
    drop("trainer.log_val_generations", "validation logging"),
    perf("trainer.rollout_data_dir", (None,), "full rollout dumps (see logging."
         "rollout_dump_samples)"),
    perf("trainer.validation_data_dir", (None,), "validation dumps"),
    drop("trainer.esi_redundant_time", "elastic-instance scheduling"),
    drop("trainer.resume_mode", "rlctl resumes with `rlctl train --resume`"),
    drop("trainer.resume_from_path", "rlctl resumes with `rlctl train --resume PATH`"),
    drop("trainer.default_hdfs_dir", "checkpoint upload"),
    drop("trainer.del_local_ckpt_after_load", "checkpoint housekeeping"),
    drop("trainer.default_local_dir", "rlctl writes checkpoints under run.output_dir/run.name"),
    drop("trainer.max_critic_ckpt_to_keep", "rlctl keeps schedule.keep_last checkpoints"),
    drop("trainer.max_actor_ckpt_to_keep", "unset: rlctl keeps schedule.keep_last"),
    drop("trainer.ray_wait_register_center_timeout", "Ray start-up bound"),
    drop("trainer.use_legacy_worker_impl", "which verl worker code runs"),
    drop("ray_kwargs.timeline_json_file", "Ray timeline"),
    drop("ray_kwargs.ray_init.*", "Ray start-up"),
)


def _off_like(value: Any) -> bool:
    return any(value is v or (type(value) is type(v) and value == v) for v in OFF)


def apply_rules(lg: Ledger) -> None:
    """Account for every key the translators left, by :data:`RULES` or as unknown.

    A key at verl's default, or under a table switched off (``enable: false``), is never
    refused: only what the user set can be.
    """
    for key in list(lg.cfg.values):
        if key in lg.entries:
            continue
        value = lg.value(key)
        switch = lg.cfg.off_switch(key)
        if switch is not None:
            lg.drop(key, f"off ({switch} is false)")
            continue
        rule = next((r for r in RULES if fnmatchcase(key, r.pattern)), None)
        if rule is None:
            _unknown(lg, key, value)
        elif rule.kind == "drop":
            lg.drop(key, rule.reason)
        elif value in rule.values:
            lg.drop(key, f"at {value!r} (off): {rule.reason}" if rule.kind == "only"
                    else f"at {value!r}")
        elif rule.kind == "perf":
            lg.ignore(key, f"{value!r}: {rule.reason}; rlctl lacks it (no effect on the math)")
        else:
            lg.error(key, f"{value!r}: {rule.reason}, which rlctl cannot reproduce",
                     f"{_fix(lg, key, rule.values[0])}, or keep this run on verl")


def _unknown(lg: Ledger, key: str, value: Any) -> None:
    if not lg.cfg.changed(key):
        lg.drop(key, "verl's default (a key rlctl does not know)")
    elif _off_like(value):
        lg.drop(key, "a key rlctl does not know, at an off value (assumed off)")
    else:
        lg.error(key, f"{value!r}: a verl key rlctl does not know, so it cannot tell what "
                 "it changes", f"{_fix(lg, key, None)}, or report the key to rlctl")


def _fix(lg: Ledger, key: str, neutral: Any) -> str:
    """How to undo the user's setting: the override that made it, or the value to put back."""
    override = lg.cfg.touched.get(key)
    if override is not None:
        if neutral is None or _off_like(neutral):
            return f"remove {override.text!r} ({override.origin})"
        return f"set it to {neutral!r}"
    target = neutral if neutral is not None else lg.cfg.defaults.get(key)
    if neutral is not None or key in lg.cfg.defaults:
        return f"set it back to {target!r} in the YAML"
    return "remove it from the YAML"
