"""verl -> rlctl for the actor's optimizer and learning-rate schedule, and for the critic.

verl steps its learning-rate schedule once per *training step*; rlctl once per *optimizer
step*. The two agree exactly when a training step is one optimizer step, or when the
schedule is constant without warm-up; otherwise the migration refuses (exit 2) rather than
stretch one schedule into the other.

rlctl's critic shares ``[algorithm.optim]`` with the actor except its learning rate, and the
actor's minibatches and epochs: a verl critic that differs there cannot be migrated.
"""

from __future__ import annotations

from typing import Any

from rlctl.migrate.ledger import Ledger

A = "actor_rollout_ref.actor"
# Megatron optimizer overrides that only move state between devices or change kernels
MEGATRON_PERF_OVERRIDES = frozenset({
    "optimizer_offload_fraction", "overlap_cpu_optimizer_d2h_h2d", "use_precision_aware_optimizer",
    "optimizer_cpu_offload", "overlap_param_gather", "overlap_grad_reduce",
})

Settings = dict[str, tuple[Any, str]]
"""rlctl ``[algorithm.optim]`` field -> (value, the verl key it came from)."""


def read_optim(lg: Ledger, prefix: str, clip_key: str, total_steps: int | None,
               opt_steps: int) -> Settings:
    """The rlctl optimizer settings of verl's optimizer table at ``prefix`` (accounting for it)."""
    megatron = f"{prefix}.lr_decay_style" in lg.cfg
    out: Settings = {}

    def take(field: str, key: str, value: Any = None) -> None:
        raw = lg.take(key, f"algorithm.optim.{field}")
        out[field] = (raw if value is None else value, key)

    take("lr", f"{prefix}.lr", float(lg.value(f"{prefix}.lr")))
    take("weight_decay", f"{prefix}.weight_decay", float(lg.value(f"{prefix}.weight_decay")))
    take("betas", f"{prefix}.betas", [float(b) for b in lg.value(f"{prefix}.betas")])
    clip = lg.value(clip_key)
    take("grad_clip", clip_key, float(clip) if clip and clip > 0 else None)
    _name(lg, prefix, megatron, take)
    scheduler = _scheduler(lg, prefix, megatron, take)
    warmup = _warmup(lg, prefix, total_steps)
    if warmup is not None:
        take("warmup_steps", f"{prefix}.lr_warmup_steps", warmup)
    if opt_steps > 1 and ((warmup or 0) > 0 or scheduler not in (None, "constant")):
        key = f"{prefix}.lr_warmup_steps" if warmup else out["scheduler"][1]
        lg.conflict(key, f"verl steps the learning-rate schedule once per training step, rlctl "
                    "once "
                 f"per optimizer step, and this recipe makes {opt_steps} optimizer steps per "
                 "training step: the warm-up / decay would not match",
                 "use a constant schedule without warm-up, or one minibatch and one epoch")
    lg.drop(f"{prefix}.total_training_steps", "filled in by verl's trainer (schedule.total_steps)")
    _overrides(lg, prefix, megatron, out)
    return out


def _name(lg: Ledger, prefix: str, megatron: bool, take) -> None:  # type: ignore[no-untyped-def]
    key = f"{prefix}.optimizer"
    name = str(lg.value(key, "AdamW")).lower()
    if megatron:
        # Megatron's "adam" is AdamW: weight decay is decoupled (adam_w_mode)
        mapped = {"adam": "adamw", "sgd": "sgd"}.get(name)
    else:
        mapped = {"adamw": "adamw", "adam": "adam", "sgd": "sgd"}.get(name)
        impl = f"{prefix}.optimizer_impl"
        if lg.value(impl, "torch.optim") != "torch.optim":
            lg.error(impl, f"{lg.value(impl)!r}: rlctl uses torch.optim's optimizers",
                     "set optimizer_impl=torch.optim")
        else:
            lg.drop(impl, "torch.optim, as rlctl")
    if mapped is None:
        lg.error(key, f'"{name}": rlctl has adamw, adam and sgd', "use AdamW")
    else:
        take("name", key, mapped)


def _scheduler(lg: Ledger, prefix: str, megatron: bool, take) -> str | None:  # type: ignore[no-untyped-def]
    if megatron:
        key = f"{prefix}.lr_decay_style"
        style = lg.value(key)
        for k, neutral in (("lr_warmup_init", 0.0), ("lr_decay_steps", None),
                           ("weight_decay_incr_style", "constant")):
            full = f"{prefix}.{k}"
            if lg.value(full) == neutral:
                lg.drop(full, f"at {neutral!r} (rlctl's schedule)")
            else:
                lg.error(full, f"{lg.value(full)!r}: rlctl's schedule has no such setting",
                         f"set it to {neutral!r}")
        lg.drop(f"{prefix}.lr_wsd_decay_style", "used only by the WSD schedule")
        lg.drop(f"{prefix}.lr_wsd_decay_steps", "used only by the WSD schedule")
        lg.drop(f"{prefix}.use_checkpoint_opt_param_scheduler", "checkpoint detail")
        lr = float(lg.value(f"{prefix}.lr"))
        min_lr = float(lg.value(f"{prefix}.min_lr") or 0.0)
        take("min_lr_ratio", f"{prefix}.min_lr", min_lr / lr if lr else 0.0)
    else:
        old = lg.value(f"{prefix}.warmup_style")
        key = f"{prefix}.warmup_style" if old else f"{prefix}.lr_scheduler_type"
        if old:
            lg.drop(f"{prefix}.lr_scheduler_type", "superseded by the deprecated warmup_style")
        else:
            lg.drop(f"{prefix}.warmup_style", "unset (deprecated)")
        style = lg.value(key)
        cycles = f"{prefix}.num_cycles"
        if style != "cosine" or lg.value(cycles) == 0.5:
            lg.drop(cycles, "half a cosine cycle, as rlctl (or no cosine schedule)")
        else:
            lg.error(cycles, f"{lg.value(cycles)} cosine cycles: rlctl's cosine is half a cycle",
                     "set num_cycles=0.5")
        take(
            "min_lr_ratio",
            f"{prefix}.min_lr_ratio",
            float(lg.value(f"{prefix}.min_lr_ratio") or 0.0),
        )
    if style not in ("constant", "linear", "cosine"):
        lg.error(key, f'"{style}" learning-rate schedule: rlctl has constant, linear and cosine',
                 "use one of those")
        return None
    take("scheduler", key, style)
    return str(style)


def _warmup(lg: Ledger, prefix: str, total_steps: int | None) -> int | None:
    steps_key, ratio_key = f"{prefix}.lr_warmup_steps", f"{prefix}.lr_warmup_steps_ratio"
    steps = lg.value(steps_key)
    if steps is not None and steps >= 0:
        lg.drop(ratio_key, "lr_warmup_steps is set")
        return int(steps)
    ratio = float(lg.value(ratio_key) or 0.0)
    lg.take(ratio_key, "algorithm.optim.warmup_steps")
    if ratio == 0:
        return 0
    if total_steps is None:
        lg.need("--train-rows", f"{ratio_key}: warm-up is {ratio} of the total steps, which are "
                "unknown", "pass --train-rows (or set trainer.total_training_steps)")
        return None
    return int(ratio * total_steps)  # verl: int(ratio * total_training_steps)


def _overrides(lg: Ledger, prefix: str, megatron: bool, out: Settings) -> None:
    table = f"{prefix}.override_optimizer_config"
    for key in list(lg.cfg.under(table)):
        value = lg.value(key)
        option = key.removeprefix(table + ".")
        if key == table:  # null or {}: nothing overridden
            lg.drop(key, "nothing overridden")
        elif megatron and option in MEGATRON_PERF_OVERRIDES:
            lg.ignore(key, "Megatron optimizer placement / precision knob; rlctl uses torch.optim")
        elif not megatron and option == "eps":
            lg.take(key, "algorithm.optim.eps")
            out["eps"] = (float(value), key)
        else:
            lg.error(key, f"optimizer override {option}={value!r} has no rlctl equivalent",
                     "remove it")


def put_optim(lg: Ledger, settings: Settings) -> None:
    for field, (value, key) in settings.items():
        lg.put(f"algorithm.optim.{field}", value, key.removeprefix("actor_rollout_ref."))


# --------------------------------------------------------------------------- critic


def critic_enabled(lg: Ledger) -> bool:
    """verl trains a critic when critic.enable says so, or (unset) for gae."""
    enable = lg.value("critic.enable")
    return bool(enable) if enable is not None else lg.value("algorithm.adv_estimator") == "gae"


def translate_critic(lg: Ledger, estimator: str | None, actor: Settings,
                     total_steps: int | None, opt_steps: int) -> None:
    enable = lg.take("critic.enable", "critic.enabled")
    enabled = bool(enable) if enable is not None else estimator == "gae"
    why = "critic.enable" if enable is not None else f"algorithm.adv_estimator = {estimator}"
    lg.put("critic.enabled", enabled, why + (" (verl trains a critic for gae)" if enable is None
                                              else ""))
    if not enabled:
        lg.drop("trainer.critic_warmup", "no critic")
        lg.drop_tree("critic", "no critic in this run")
        return
    warmup = lg.take("trainer.critic_warmup", "critic.warmup_steps")
    lg.put("critic.warmup_steps", int(warmup), "trainer.critic_warmup")
    path = lg.take("critic.model.path", "critic.path")
    lg.put("critic.path", str(path), "critic.model.path")
    lg.put("critic.cliprange_value", float(lg.take("critic.cliprange_value",
                                                   "critic.cliprange_value")),
           "critic.cliprange_value")
    clip_key = "critic.grad_clip" if "critic.grad_clip" in lg.cfg else "critic.optim.clip_grad"
    if clip_key == "critic.grad_clip":
        lg.drop("critic.optim.clip_grad", "verl's FSDP critic uses critic.grad_clip")
    settings = read_optim(lg, "critic.optim", clip_key, total_steps, opt_steps)
    lr, _ = settings.pop("lr")
    lg.put("critic.lr", lr, "critic.optim.lr")
    lg.entries["critic.optim.lr"].note = "critic.lr"
    for field, (value, key) in settings.items():
        expected = actor.get(field, (None, ""))[0]
        entry = lg.entries.get(key)
        if value == expected:
            if entry is not None:
                entry.fate, entry.note = "dropped", f"same as the actor's {field}"
        else:
            lg.entries.pop(key, None)
            lg.conflict(key, f"{value!r} differs from the actor's {field} ({expected!r}); rlctl's "
                     "critic shares [algorithm.optim] with the actor except lr",
                     f"set it to the actor's value {expected!r}")
    for key, actor_key in (("critic.ppo_mini_batch_size", f"{A}.ppo_mini_batch_size"),
                           ("critic.ppo_epochs", f"{A}.ppo_epochs"),
                           ("critic.loss_agg_mode", f"{A}.loss_agg_mode")):
        lg.same_or_error(key, lg.value(actor_key), f"the actor's ({actor_key})",
                         f"set {key} to the actor's value")
    lg.same_or_ignore("critic.ppo_micro_batch_size_per_gpu",
                      lg.value(f"{A}.ppo_micro_batch_size_per_gpu"),
                      "the actor's micro-batch size (engines.train.micro_batch_size)")
