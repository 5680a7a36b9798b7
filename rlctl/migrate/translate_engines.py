"""verl -> rlctl for how a run executes and what it reads: engines, resources, model, rollout
sampling, data, rewards, schedule, logging.

Nothing here changes the math except the sampling settings, the prompt and response lengths,
the data and the reward; those are mapped exactly or refused.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from typing import Any

from rlctl.migrate.ledger import Ledger
from rlctl.migrate.translate_optim import critic_enabled

A = "actor_rollout_ref.actor"
R = "actor_rollout_ref.rollout"
REF = "actor_rollout_ref.ref"
M = "actor_rollout_ref.model"
T = "trainer"

ROLLOUT_ENGINES = {"vllm": "vllm", "sglang": "sglang", "hf": "hf"}
SINKS = {"console": "console", "wandb": "wandb", "tensorboard": "tensorboard",
         "mlflow": "mlflow", "file": "jsonl"}


@dataclass(frozen=True)
class Layout:
    """Where the run executes, as verl lays it out."""

    world: int
    """trainer.nnodes x trainer.n_gpus_per_node (actor, ref, critic and rollout share them)."""
    backend: str
    """rlctl training engine: ``fsdp`` or ``megatron``."""
    model_parallel: int
    """Ranks sharing one copy of the model: TP x PP x CP (megatron) or the Ulysses SP size."""
    per_node: int = 8
    """trainer.n_gpus_per_node."""


def translate_layout(lg: Ledger) -> Layout | None:
    nodes = int(lg.take(f"{T}.nnodes", "resources.nodes"))
    per_node = int(lg.take(f"{T}.n_gpus_per_node", "resources.devices_per_node"))
    world = nodes * per_node
    lg.put("resources.mode", "ray", "verl runs on Ray")
    lg.put("resources.nodes", nodes, "trainer.nnodes")
    lg.put("resources.devices_per_node", per_node, "trainer.n_gpus_per_node")
    lg.put("resources.placement", "colocate", "actor_rollout_ref.hybrid_engine (shared GPUs)")
    lg.drop("actor_rollout_ref.hybrid_engine", "rlctl colocates rollout and training")
    cpus = lg.take("ray_kwargs.ray_init.num_cpus", "resources.num_cpus")
    if cpus is not None:
        lg.put("resources.num_cpus", int(cpus), "ray_kwargs.ray_init.num_cpus")
    device = lg.take(f"{T}.device", "run.device")
    if device not in ("cuda", "cpu"):
        lg.error(f"{T}.device", f'"{device}": rlctl runs on CUDA or CPU', "use trainer.device=cuda")
    else:
        lg.put("run.device", device, "trainer.device")
    strategy = lg.take(f"{A}.strategy", "engines.train.backend")
    backend = {"fsdp": "fsdp", "fsdp2": "fsdp", "megatron": "megatron"}.get(strategy)
    if backend is None:
        lg.error(f"{A}.strategy", f'"{strategy}": rlctl has the fsdp and megatron engines',
                 "use strategy=fsdp or the megatron config")
        return None
    roles = (REF, "critic") if critic_enabled(lg) else (REF,)
    for role in roles:
        lg.same_or_ignore(f"{role}.strategy", strategy, "the actor's engine")
    lg.put("engines.train.backend", backend, "actor.strategy")
    lg.put("engines.train.ranks", world, "trainer.nnodes x trainer.n_gpus_per_node")
    if backend == "megatron":
        mp = _megatron(lg)
    else:
        mp = _fsdp(lg)
    return Layout(world, backend, mp, per_node)


def _fsdp(lg: Ledger) -> int:
    fc = f"{A}.fsdp_config"
    dtype = lg.take(f"{fc}.dtype", "engines.train.options.mixed_precision")
    lg.put("engines.train.options.mixed_precision", "bf16" if dtype == "bfloat16" else "none",
           "actor.fsdp_config.dtype (compute dtype)")
    master = lg.take(f"{fc}.model_dtype", "model.dtype")
    lg.put("model.dtype", {"fp32": "float32", "float32": "float32", "bf16": "bfloat16",
                           "bfloat16": "bfloat16"}.get(str(master), "float32"),
           "actor.fsdp_config.model_dtype (parameters and master weights)")
    offload = any(bool(lg.take(f"{fc}.{k}", "engines.train.options.cpu_offload"))
                  for k in ("param_offload", "optimizer_offload", "offload_policy"))
    lg.put("engines.train.options.cpu_offload", offload, "actor.fsdp_config.*_offload")
    reshard = lg.take(f"{fc}.reshard_after_forward", "engines.train.options.reshard_after_forward")
    lg.put("engines.train.options.reshard_after_forward", bool(reshard),
           "actor.fsdp_config.reshard_after_forward")
    sp = int(lg.value(f"{A}.ulysses_sequence_parallel_size") or 1)
    for role in (REF, "critic.model") if critic_enabled(lg) else (REF,):
        for k in ("param_offload", "optimizer_offload", "offload_policy", "reshard_after_forward"):
            if f"{role}.fsdp_config.{k}" in lg.cfg:
                lg.same_or_ignore(f"{role}.fsdp_config.{k}", lg.value(f"{fc}.{k}"),
                                  "the actor's engine options (one [engines.train.options])")
    return sp


def _megatron(lg: Ledger) -> int:
    mc = f"{A}.megatron"
    opts = "engines.train.options"
    sizes = {}
    for verl, rlctl in (("tensor_model_parallel_size", "tensor_parallel"),
                        ("pipeline_model_parallel_size", "pipeline_parallel"),
                        ("virtual_pipeline_model_parallel_size", "virtual_pipeline_parallel")):
        value = lg.take(f"{mc}.{verl}", f"{opts}.{rlctl}")
        sizes[rlctl] = value
        if value is not None:
            lg.put(f"{opts}.{rlctl}", int(value), f"actor.megatron.{verl}")
    for verl, rlctl in (("context_parallel_size", "context_parallel"),
                        ("expert_model_parallel_size", "expert_parallel")):
        value = int(lg.value(f"{mc}.{verl}") or 1)
        if value == 1:
            lg.take(f"{mc}.{verl}", f"{opts}.{rlctl}")
        else:
            lg.ignore(f"{mc}.{verl}", f"{value}: rlctl's megatron engine supports only 1 "
                      "(a parallel layout: the math is the same with more data parallelism)")
    etp = lg.value(f"{mc}.expert_tensor_parallel_size")
    if etp in (None, 1):
        lg.drop(f"{mc}.expert_tensor_parallel_size", "unset")
    else:
        lg.ignore(f"{mc}.expert_tensor_parallel_size", "rlctl has no expert tensor parallelism")
    tp = int(sizes["tensor_parallel"] or 1)
    # verl turns sequence parallelism off by itself when TP = 1
    sp = bool(lg.take(f"{mc}.sequence_parallel", f"{opts}.sequence_parallel")) and tp > 1
    lg.put(f"{opts}.sequence_parallel", sp, "actor.megatron.sequence_parallel (needs TP > 1)")
    if sp:
        lg.put(f"{opts}.transformer_impl", "transformer_engine",
               "verl's megatron layers are Transformer Engine's (sequence parallel needs them)")
    dist = f"{mc}.use_distributed_optimizer"
    if lg.value(dist):
        lg.ignore(dist, "rlctl's megatron engine keeps full optimizer state per data-parallel "
                  "rank (memory, not math)")
    else:
        lg.drop(dist, "off")
    recompute = lg.take(f"{mc}.override_transformer_config.recompute_granularity",
                        f"{opts}.recompute_granularity")
    if recompute is not None:
        lg.put(f"{opts}.recompute_granularity", recompute,
               "actor.megatron.override_transformer_config.recompute_granularity")
    lg.put("model.dtype", "float32", "verl's megatron optimizer keeps fp32 master weights")
    if lg.value(f"{mc}.dtype") == "float32":
        lg.drop(f"{mc}.dtype", "float32, as model.dtype")
    else:
        lg.ignore(f"{mc}.dtype", "rlctl's megatron engine computes in model.dtype (float32 "
                  "keeps verl's fp32 master weights; verl computes in bf16)")
    _role_layouts(lg, mc)
    pp = int(sizes["pipeline_parallel"] or 1)
    cp = int(lg.value(f"{mc}.context_parallel_size") or 1)
    return tp * pp * cp  # verl's data-parallel size is world / (TP x PP x CP)


def _role_layouts(lg: Ledger, mc: str) -> None:
    """The ref's (and critic's) parallel layout: rlctl has one, the actor's."""
    roles = (f"{REF}.megatron", "critic.megatron") if critic_enabled(lg) else (f"{REF}.megatron",)
    for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
              "virtual_pipeline_model_parallel_size", "context_parallel_size",
              "expert_model_parallel_size"):
        for role in roles:
            if f"{role}.{k}" in lg.cfg:
                lg.same_or_ignore(f"{role}.{k}", lg.value(f"{mc}.{k}"),
                                  "the actor's layout (one [engines.train.options])")


# --------------------------------------------------------------------------- rollout


def _agent_workers(verl_workers: int, replicas: int, tp: int, per_node: int) -> int:
    """verl's agent-loop workers all share every server; rlctl's each own an equal share of
    them, started on its node: the count dividing ``replicas`` whose share tiles a node,
    nearest verl's (fewer first)."""
    fits = [d for d in range(1, replicas + 1)
            if replicas % d == 0 and per_node % ((replicas // d) * tp) == 0]
    if not fits:
        return replicas  # one server per worker: placement names what does not fit
    return min(fits, key=lambda d: (abs(d - verl_workers), d > verl_workers))


def translate_rollout(lg: Ledger, layout: Layout) -> None:
    name = lg.take(f"{R}.name", "engines.rollout.backend")
    backend = ROLLOUT_ENGINES.get(name)
    if name == "???":
        lg.need(f"{R}.name", "unset (??? in verl's config: verl needs it too)",
                "set actor_rollout_ref.rollout.name=vllm (or sglang)")
        return
    if backend is None:
        lg.error(f"{R}.name", f'"{name}": rlctl has the vllm, sglang and hf rollout engines',
                 "set actor_rollout_ref.rollout.name=vllm")
        return
    lg.put("engines.rollout.backend", backend, "actor_rollout_ref.rollout.name")
    workers = int(lg.take(f"{R}.agent.num_workers", "engines.rollout.agent_workers"))
    opts = "engines.rollout.options"
    tp = int(lg.take(f"{R}.tensor_model_parallel_size", "engines.rollout.replicas"))
    server = backend != "hf"
    if not server:
        lg.put("engines.rollout.agent_workers", workers, "rollout.agent.num_workers")
    if server:
        if layout.world % tp:
            lg.conflict(f"{R}.tensor_model_parallel_size", f"{layout.world} GPUs do not split into "
                     f"rollout replicas of {tp}", "choose a tensor_model_parallel_size dividing "
                     "the GPU count")
            return
        replicas = layout.world // tp
        shared = _agent_workers(workers, replicas, tp, layout.per_node)
        lg.put("engines.rollout.agent_workers", shared,
               "rollout.agent.num_workers" if shared == workers else
               f"rollout.agent.num_workers {workers}, each owning {replicas // shared} of "
               f"{replicas} servers")
        lg.put("engines.rollout.replicas", replicas,
               f"{layout.world} GPUs / rollout.tensor_model_parallel_size {tp}")
        lg.put(f"{opts}.tensor_parallel_size", tp, "rollout.tensor_model_parallel_size")
        mem = float(lg.take(f"{R}.gpu_memory_utilization", f"{opts}.gpu_memory_utilization"))
        lg.put(f"{opts}.gpu_memory_utilization", mem, "rollout.gpu_memory_utilization")
        if backend == "sglang":
            lg.put(f"{opts}.mem_fraction_static", mem, "rollout.gpu_memory_utilization")
        vllm = backend == "vllm"
        eager = bool(lg.take(f"{R}.enforce_eager", f"{opts}."
                             + ("enforce_eager" if vllm else "disable_cuda_graph")))
        prefix = bool(lg.take(f"{R}.enable_prefix_caching", f"{opts}."
                              + ("enable_prefix_caching" if vllm else "enable_radix_cache")))
        if vllm:
            lg.put(f"{opts}.enforce_eager", eager, "rollout.enforce_eager")
            lg.put(f"{opts}.enable_prefix_caching", prefix, "rollout.enable_prefix_caching")
        else:
            lg.put(f"{opts}.disable_cuda_graph", eager, "rollout.enforce_eager")
            lg.put(f"{opts}.enable_radix_cache", prefix, "rollout.enable_prefix_caching")
        max_len = lg.take(f"{R}.max_model_len", f"{opts}.max_model_len")
        if max_len is not None:
            lg.put(f"{opts}.max_model_len", int(max_len), "rollout.max_model_len")
        if lg.take(f"{R}.ignore_eos", f"{opts}.ignore_eos"):
            lg.put(f"{opts}.ignore_eos", True, "rollout.ignore_eos")
    else:
        for k in ("tensor_model_parallel_size", "gpu_memory_utilization", "enforce_eager",
                  "enable_prefix_caching", "max_model_len", "ignore_eos"):
            lg.drop(f"{R}.{k}", "the hf rollout engine has no such setting")
    _sampling(lg)


def _sampling(lg: Ledger) -> None:
    sample = bool(lg.take(f"{R}.do_sample", "rollout.temperature"))
    temp = float(lg.take(f"{R}.temperature", "rollout.temperature"))
    lg.put("rollout.temperature", temp if sample else 0.0,
           "rollout.temperature" if sample else "rollout.do_sample = false (greedy)")
    top_k = int(lg.take(f"{R}.top_k", "rollout.top_k"))
    lg.put("rollout.top_k", max(top_k, 0), "rollout.top_k (-1 = off)")
    lg.put("rollout.top_p", float(lg.take(f"{R}.top_p", "rollout.top_p")), "rollout.top_p")
    length = int(lg.take(f"{R}.response_length", "rollout.max_new_tokens"))
    lg.put("rollout.max_new_tokens", length, "rollout.response_length")
    lg.same_or_ignore("data.max_response_length", length,
                      "actor_rollout_ref.rollout.response_length (what verl's rollout uses)")
    vk = f"{R}.val_kwargs"
    val_sample = bool(lg.take(f"{vk}.do_sample", "rollout.val_temperature"))
    val_temp = float(lg.take(f"{vk}.temperature", "rollout.val_temperature"))
    lg.put("rollout.val_temperature", val_temp if val_sample else 0.0,
           "rollout.val_kwargs.temperature" if val_sample else "val_kwargs.do_sample = false")
    lg.put("rollout.val_group_size", int(lg.take(f"{vk}.n", "rollout.val_group_size")),
           "rollout.val_kwargs.n")
    for k, neutral in (("top_p", 1.0), ("top_k", -1)):
        if not val_sample or lg.value(f"{vk}.{k}") == neutral:
            lg.drop(f"{vk}.{k}", "off (greedy validation or no filtering)")
        else:
            lg.ignore(f"{vk}.{k}", "rlctl validation samples with temperature only "
                      "(validation, not training)")
    loop = lg.take(f"{R}.agent.default_agent_loop", "rollout.agent_loop")
    if loop != "single_turn_agent":
        lg.error(f"{R}.agent.default_agent_loop", f'"{loop}": rlctl has the single-turn agent '
                 "loop only", "use single_turn_agent")
    else:
        lg.put("rollout.agent_loop", "single_turn", "rollout.agent.default_agent_loop")
    if lg.value(f"{R}.multi_turn.enable"):
        lg.error(f"{R}.multi_turn.enable", "multi-turn rollouts with tools are not in rlctl "
                 "yet", "set multi_turn.enable=false")
    else:
        lg.drop_tree(f"{R}.multi_turn", "multi-turn is off")


# --------------------------------------------------------------------------- model & data


def translate_model(lg: Ledger) -> None:
    lg.put("model.path", str(lg.take(f"{M}.path", "model.path")), "actor_rollout_ref.model.path")
    tok = lg.take(f"{M}.tokenizer_path", "model.tokenizer") or lg.take("data.tokenizer",
                                                                         "model.tokenizer")
    if tok is not None:
        lg.put("model.tokenizer", str(tok), "model.tokenizer_path")
    else:
        lg.drop("data.tokenizer", "unset: the model's tokenizer")
    lg.put("model.trust_remote_code", bool(lg.take(f"{M}.trust_remote_code",
                                                   "model.trust_remote_code")),
           "model.trust_remote_code")
    lg.put("model.gradient_checkpointing",
           bool(lg.take(f"{M}.enable_gradient_checkpointing", "model.gradient_checkpointing")),
           "model.enable_gradient_checkpointing")
    if critic_enabled(lg):
        lg.same_or_ignore("critic.model.enable_gradient_checkpointing",
                          lg.value(f"{M}.enable_gradient_checkpointing"),
                          "the policy's model.gradient_checkpointing")


def translate_data(lg: Ledger, rewards: list[str], known_rewards: list[str],
                   reward_model: dict[str, Any] | None, custom: str) -> None:
    for split, verl in (("train", "data.train_files"), ("val", "data.val_files")):
        files = lg.take(verl, f"data.{split}")
        files = [files] if isinstance(files, str) else list(files or [])
        if files:
            lg.put(f"data.{split}", files[0] if len(files) == 1 else files, verl)
    lg.put("data.prompt_key", str(lg.take("data.prompt_key", "data.prompt_key")), "data.prompt_key")
    lg.put(
        "data.max_prompt_tokens",
        int(lg.take("data.max_prompt_length", "data.max_prompt_tokens")),
        "data.max_prompt_length",
    )
    lg.same_or_ignore(f"{R}.prompt_length", lg.value("data.max_prompt_length"),
                      "data.max_prompt_length (rlctl has one prompt limit)")
    lg.put("data.shuffle", bool(lg.take("data.shuffle", "data.shuffle")), "data.shuffle")
    truncation = lg.value("data.truncation")
    if truncation == "error":
        lg.drop("data.truncation", "error, as rlctl: over-long prompts are refused")
    else:
        lg.ignore("data.truncation", f'"{truncation}": rlctl never truncates prompts, it '
                  "refuses over-long ones (data.max_prompt_tokens)")
    lg.drop("data.filter_overlong_prompts", "rlctl refuses over-long prompts when it loads them "
            "instead of filtering them out (a dataset without any trains the same)")
    if lg.value("data.reward_fn_key") == "data_source":
        lg.drop("data.reward_fn_key", "data_source, which rlctl also hands to rewards")
    else:
        lg.ignore("data.reward_fn_key", "rlctl hands rewards the data_source column")
    _rewards(lg, rewards, known_rewards, reward_model, custom)


def _rewards(lg: Ledger, rewards: list[str], known: list[str],
             reward_model: dict[str, Any] | None, prefix: str) -> None:
    custom, name_key = f"{prefix}.path", f"{prefix}.name"
    if reward_model is not None:  # verl's managers return the reward model's score alone
        lg.put("rewards", [reward_model], "reward_model.enable")
        lg.drop(custom, "not called: the reward model scores")
        lg.drop(name_key, "not called: the reward model scores")
        if rewards:
            lg.notes.append(f"--reward {' '.join(rewards)}: not used, verl scores with the "
                            "reward model alone")
        return
    for name in rewards:
        if name not in known:
            lg.problems.append(_problem("--reward", f'no reward function "{name}" is registered',
                                        f"use one of: {', '.join(known)}"))
    if rewards:
        lg.put("rewards", [{"name": r} for r in rewards], "--reward")
        lg.take(custom, "rewards (--reward)")
        lg.drop(name_key, "replaced by --reward")
        return
    if lg.value(custom) is None:
        lg.need("--reward", f"{custom} unset: verl scores with its built-in reward, chosen per "
                "row by "
                 "data_source (default_compute_score); rlctl needs the reward named",
                 f"pass --reward NAME (registered: {', '.join(known)}), e.g. --reward gsm8k "
                 "for verl's gsm8k data")
    else:
        lg.error(custom, f"a custom reward function ({lg.value(custom)}) runs Python rlctl "
                 "does not load", "register it as an rlctl reward plugin, then pass --reward NAME")


def _problem(key: str, message: str, fix: str):  # type: ignore[no-untyped-def]
    from rlctl.migrate.ledger import Problem

    return Problem(key, message, fix)


# --------------------------------------------------------------------------- schedule & logging


def total_steps(lg: Ledger, rows: int | None, prompts: int | None) -> int | None:
    fixed = lg.value(f"{T}.total_training_steps")
    if fixed is not None:
        lg.take(f"{T}.total_training_steps", "schedule.total_steps")
        lg.drop(f"{T}.total_epochs", "trainer.total_training_steps is set")
        return int(fixed)
    epochs = int(lg.take(f"{T}.total_epochs", "schedule.total_steps"))
    lg.drop(f"{T}.total_training_steps", "unset: epochs x batches per epoch")
    if rows is None or not prompts:
        lg.need("--train-rows", f"{T}.total_epochs = {epochs}: verl runs epochs x (training "
                "rows // "
                 "data.train_batch_size) steps, and the row count is unknown",
                 "pass --train-rows N (rows of the training set), or set "
                 "trainer.total_training_steps")
        return None
    steps = (rows // prompts) * epochs  # verl's dataloader drops the last partial batch
    if steps < 1:
        lg.conflict(f"{T}.total_epochs", f"{rows} rows make no full batch of {prompts} prompts",
                 "lower data.train_batch_size")
        return None
    lg.notes.append(f"schedule.total_steps = {epochs} epochs x ({rows} rows // {prompts} "
                    f"prompts) = {steps} (before verl's over-long prompt filter, if any)")
    return steps


def translate_schedule(lg: Ledger, steps: int | None) -> None:
    if steps is not None:
        lg.put("schedule.total_steps", steps, "trainer.total_training_steps / total_epochs")
    test = int(lg.take(f"{T}.test_freq", "schedule.eval_every"))
    lg.put("schedule.eval_every", max(test, 0), "trainer.test_freq (-1 = never)")
    save = int(lg.take(f"{T}.save_freq", "schedule.save_every"))
    lg.put("schedule.save_every", max(save, 0), "trainer.save_freq (-1 = only at the end)")
    keep = lg.take(f"{T}.max_actor_ckpt_to_keep", "schedule.keep_last")
    if keep is not None and keep > 0:
        lg.put("schedule.keep_last", int(keep), "trainer.max_actor_ckpt_to_keep")
    if lg.value(f"{T}.val_only"):
        lg.error(f"{T}.val_only", "a validation-only run", "rlctl validates during training "
                 "(schedule.eval_every)")
    else:
        lg.drop(f"{T}.val_only", "off")
    if lg.value(f"{T}.val_before_train"):
        lg.ignore(f"{T}.val_before_train", "rlctl validates every schedule.eval_every steps, "
                  "not before the first (validation, not training)")
    else:
        lg.drop(f"{T}.val_before_train", "off")


def translate_run(lg: Ledger, backend: str | None) -> None:
    name = str(lg.take(f"{T}.experiment_name", "run.name"))
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._") or "verl-run"
    lg.put("run.name", clean, "trainer.experiment_name")
    seed = lg.value("data.seed")
    engine_seed = (f"{A}.megatron.seed" if backend == "megatron" else f"{A}.fsdp_config.seed")
    if seed is None:
        lg.drop("data.seed", "unset: verl seeds the data order from its default")
        seed = lg.take(engine_seed, "run.seed")
        origin = engine_seed.removeprefix("actor_rollout_ref.")
    else:
        lg.take("data.seed", "run.seed")
        origin = "data.seed"
    lg.put("run.seed", int(seed or 0), origin + " (rlctl derives every seed from run.seed)")
    project = str(lg.take(f"{T}.project_name", "logging.sink_options"))
    sinks = ["console", "jsonl"]
    for logger in lg.take(f"{T}.logger", "logging.sinks") or []:
        sink = SINKS.get(str(logger))
        if sink is None:
            lg.notes.append(f'trainer.logger "{logger}": rlctl has no such sink (left out)')
        elif sink in ("wandb", "mlflow") and importlib.util.find_spec(sink) is None:
            # the sink checks for its package: a recipe naming it would not validate here
            lg.notes.append(f'trainer.logger "{logger}": left out because {sink} is not '
                            f'installed; `pip install {sink}`, then add "{sink}" to '
                            "logging.sinks")
        elif sink not in sinks:
            sinks.append(sink)
    lg.put("logging.sinks", sinks, "trainer.logger (+ jsonl, which rlctl report reads)")
    if "wandb" in sinks:
        lg.put("logging.sink_options.wandb", {"project": project, "name": name},
               "trainer.project_name / experiment_name")
    if "mlflow" in sinks:
        lg.put("logging.sink_options.mlflow", {"experiment": project, "run_name": name},
               "trainer.project_name / experiment_name")
    if lg.value("transfer_queue.enable"):
        lg.take("transfer_queue.enable", "data_plane.backend")
        lg.put("data_plane.backend", "transferqueue", "transfer_queue.enable")
    else:
        lg.drop("transfer_queue.enable", "off: rlctl's default ray data plane")


def log_prob_micro(lg: Ledger, dp: int) -> Any:
    """``engines.train.log_prob_micro_batch_size`` from the rollout's (old log-prob) setting."""
    target = "engines.train.log_prob_micro_batch_size"
    value = None
    for role in (R, REF):
        per_gpu = lg.value(f"{role}.log_prob_micro_batch_size_per_gpu")
        total = lg.value(f"{role}.log_prob_micro_batch_size")
        size = per_gpu if per_gpu is not None else (max(total // dp, 1) if total else None)
        if value is None and size is not None:
            value = size
            lg.take(f"{role}.log_prob_micro_batch_size_per_gpu" if per_gpu is not None
                    else f"{role}.log_prob_micro_batch_size", target)
        elif size is not None:
            key = f"{role}.log_prob_micro_batch_size" + ("_per_gpu" if per_gpu is not None else "")
            lg.same_or_ignore(key, value, "the rollout's log-prob micro-batch (rlctl has one)")
    if value is not None:
        lg.put(target, int(value), "rollout.log_prob_micro_batch_size_per_gpu")
    return value
