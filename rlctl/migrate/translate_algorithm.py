"""verl -> rlctl for what is optimised: batch semantics, estimator, policy loss, KL, optimizer,
critic.

Batch semantics, exactly as verl's workers compute them:

* ``data.train_batch_size`` counts prompts -> ``algorithm.prompts_per_step``;
* ``rollout.n`` responses per prompt -> ``algorithm.group_size``;
* ``actor.ppo_mini_batch_size`` counts prompts *before* n, so a step has
  ``train_batch_size / ppo_mini_batch_size`` minibatches -> ``algorithm.minibatches``;
* ``ppo_micro_batch_size_per_gpu`` counts samples per data-parallel rank ->
  ``engines.train.micro_batch_size`` (the deprecated global ``ppo_micro_batch_size`` is
  divided by the data-parallel size first, as verl does).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlctl.migrate.ledger import Ledger

A = "actor_rollout_ref.actor"
R = "actor_rollout_ref.rollout"
REF = "actor_rollout_ref.ref"

KL_TYPES = {"kl": "k1", "k1": "k1", "abs": "abs", "mse": "k2", "k2": "k2",
            "low_var_kl": "k3", "k3": "k3"}
# verl keeps these as separate implementations of the same estimator
ESTIMATOR_ALIASES = {"grpo_vectorized": "grpo", "rloo_vectorized": "rloo"}


@dataclass(frozen=True)
class VerlBatch:
    """verl's batch numbers, computed the way its workers normalise them."""

    prompts_per_step: int
    group_size: int
    prompts_per_minibatch: int
    minibatches: int
    epochs: int
    data_parallel_size: int
    micro_batch_size: int
    """Samples per forward/backward on one data-parallel rank."""
    dynamic: bool
    """``use_dynamic_bsz``: verl packs micro-batches by tokens instead."""

    @property
    def samples_per_step(self) -> int:
        return self.prompts_per_step * self.group_size

    @property
    def minibatch_size(self) -> int:
        return self.prompts_per_minibatch * self.group_size

    @property
    def minibatch_size_per_rank(self) -> int:
        return self.minibatch_size // self.data_parallel_size

    def as_dict(self) -> dict[str, int]:
        per_rank = self.minibatch_size_per_rank
        micro = -(-per_rank // self.micro_batch_size) if per_rank else 0
        return {
            "samples_per_step": self.samples_per_step,
            "prompts_per_minibatch": self.prompts_per_minibatch,
            "minibatch_size": self.minibatch_size,
            "data_parallel_size": self.data_parallel_size,
            "minibatch_size_per_rank": per_rank,
            "micro_batches_per_rank": micro,
            "grad_accumulation_steps": micro,
            "optimizer_steps_per_train_step": self.minibatches * self.epochs,
        }


def _int(lg: Ledger, key: str) -> int | None:
    value = lg.value(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        lg.error(key, f"{value!r} is not an integer", "give a whole number")
        return None
    return value


# --------------------------------------------------------------------------- batch


def translate_batch(lg: Ledger, world: int, model_parallel: int) -> VerlBatch | None:
    """The global batch and its split; ``model_parallel`` is TP x PP x CP (megatron), else SP."""
    prompts = _int(lg, "data.train_batch_size")
    n = _int(lg, f"{R}.n")
    mini = _int(lg, f"{A}.ppo_mini_batch_size")
    epochs = _int(lg, f"{A}.ppo_epochs")
    lg.take("data.train_batch_size", "algorithm.prompts_per_step")
    lg.take(f"{R}.n", "algorithm.group_size")
    lg.take(f"{A}.ppo_mini_batch_size", "algorithm.minibatches")
    lg.take(f"{A}.ppo_epochs", "algorithm.epochs")
    if not (prompts and n and mini and epochs) or min(prompts, n, mini, epochs) < 1:
        if not lg.problems:
            lg.conflict("data.train_batch_size", "batch sizes must be positive integers")
        return None
    if mini > prompts or prompts % mini:
        lg.conflict(f"{A}.ppo_mini_batch_size",
                 f"{prompts} prompts per step (data.train_batch_size) do not split into equal "
                 f"minibatches of {mini} prompts; verl would run a smaller last minibatch "
                 "(or refuse), rlctl's minibatches are equal",
                 f"choose a ppo_mini_batch_size that divides {prompts}")
        return None
    dp = max(world // model_parallel, 1)
    if (mini * n) % dp:
        lg.conflict(f"{A}.ppo_mini_batch_size",
                 f"a minibatch of {mini} prompts x {n} = {mini * n} samples does not split over "
                 f"{dp} data-parallel ranks; verl would floor it to "
                 f"{(mini * n) // dp} per rank and train on fewer samples",
                 f"choose ppo_mini_batch_size x rollout.n divisible by {dp}")
        return None
    per_rank = mini * n // dp
    dynamic = bool(lg.take(f"{A}.use_dynamic_bsz", "engines.train.micro_batch_size"))
    micro = _micro_batch(lg, dp, per_rank, dynamic)
    if micro is None:
        return None
    lg.put("algorithm.prompts_per_step", prompts, "data.train_batch_size (prompts)")
    lg.put("algorithm.group_size", n, "actor_rollout_ref.rollout.n")
    lg.put("algorithm.minibatches", prompts // mini,
           f"train_batch_size / ppo_mini_batch_size = {prompts} / {mini} (prompts)")
    lg.put("algorithm.epochs", epochs, "actor.ppo_epochs")
    shuffle = lg.take(f"{A}.shuffle", "algorithm.shuffle_minibatches")
    lg.put("algorithm.shuffle_minibatches", bool(shuffle), "actor.shuffle")
    return VerlBatch(prompts, n, mini, prompts // mini, epochs, dp, micro, dynamic)


def _micro_batch(lg: Ledger, dp: int, per_rank: int, dynamic: bool) -> int | None:
    per_gpu = _int(lg, f"{A}.ppo_micro_batch_size_per_gpu")
    global_mb = _int(lg, f"{A}.ppo_micro_batch_size")
    target = "engines.train.micro_batch_size"
    if per_gpu is not None and global_mb is not None and not dynamic:
        lg.conflict(f"{A}.ppo_micro_batch_size", "both ppo_micro_batch_size and "
                 "ppo_micro_batch_size_per_gpu are set; verl refuses this",
                 "remove the deprecated actor.ppo_micro_batch_size")
        return None
    if per_gpu is not None:
        lg.take(f"{A}.ppo_micro_batch_size_per_gpu", target)
        lg.drop(f"{A}.ppo_micro_batch_size", "unset (ppo_micro_batch_size_per_gpu is used)")
        micro, origin = per_gpu, "actor.ppo_micro_batch_size_per_gpu"
    elif global_mb is not None:
        lg.take(f"{A}.ppo_micro_batch_size", target)
        lg.drop(f"{A}.ppo_micro_batch_size_per_gpu", "unset (the global size is used)")
        micro, origin = (
            max(global_mb // dp, 1),
            f"actor.ppo_micro_batch_size {global_mb} / {dp} ranks",
        )
    elif dynamic:
        lg.drop(f"{A}.ppo_micro_batch_size", "unset (dynamic batch size)")
        lg.drop(f"{A}.ppo_micro_batch_size_per_gpu", "unset (dynamic batch size)")
        # verl packs micro-batches of at most ppo_max_token_len_per_gpu tokens; as many
        # full-length samples fit in that many tokens
        tokens = int(lg.take(f"{A}.ppo_max_token_len_per_gpu", target))
        longest = int(lg.value(f"{R}.prompt_length", 1)) + int(lg.value(f"{R}.response_length", 1))
        micro = max(tokens // max(longest, 1), 1)
        origin = f"ppo_max_token_len_per_gpu {tokens} // (prompt + response {longest}) tokens"
    else:
        lg.conflict(f"{A}.ppo_micro_batch_size_per_gpu", "no micro-batch size: verl refuses a "
                 "config without ppo_micro_batch_size_per_gpu unless use_dynamic_bsz is on",
                 "set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
        return None
    if dynamic:
        lg.notes.append("actor.use_dynamic_bsz: verl packs micro-batches by token count; rlctl "
                        "uses a fixed number of samples (engines.train.micro_batch_size), which "
                        "changes memory use, not the math")
        if per_gpu is not None or global_mb is not None:
            lg.take(f"{A}.ppo_max_token_len_per_gpu", target)
    else:
        lg.drop(f"{A}.ppo_max_token_len_per_gpu", "used only with use_dynamic_bsz")
        if per_rank % micro:
            lg.conflict(f"{A}.ppo_micro_batch_size_per_gpu",
                     f"{per_rank} samples per rank and minibatch do not split into micro-batches "
                     f"of {micro}; verl asserts on this", f"choose a divisor of {per_rank}")
            return None
    micro = min(micro, per_rank)
    lg.put("engines.train.micro_batch_size", micro, origin + " (samples per rank)")
    return micro


# --------------------------------------------------------------------------- estimator & loss


def translate_estimator(lg: Ledger, estimators: list[str]) -> str | None:
    est = lg.take("algorithm.adv_estimator", "algorithm.estimator")
    name = ESTIMATOR_ALIASES.get(est, est)
    if name not in estimators:
        lg.error("algorithm.adv_estimator", f'no rlctl estimator for verl\'s "{est}"',
                 f"use one rlctl has: {', '.join(estimators)}")
        return None
    lg.put("algorithm.estimator", name, "algorithm.adv_estimator")
    lg.put(
        "algorithm.gamma", float(lg.take("algorithm.gamma", "algorithm.gamma")), "algorithm.gamma"
    )
    lg.put("algorithm.lam", float(lg.take("algorithm.lam", "algorithm.lam")), "algorithm.lam")
    norm = lg.take("algorithm.norm_adv_by_std_in_grpo", "algorithm.norm_adv_by_std")
    lg.put("algorithm.norm_adv_by_std", bool(norm), "algorithm.norm_adv_by_std_in_grpo")
    return name


def translate_loss(lg: Ledger, losses: list[str]) -> None:
    mode = lg.take(f"{A}.policy_loss.loss_mode", "algorithm.loss.policy_loss")
    if mode not in losses:
        lg.error(f"{A}.policy_loss.loss_mode", f'no rlctl policy loss for verl\'s "{mode}"',
                 f"use one rlctl has: {', '.join(losses)}")
        return
    lg.put("algorithm.loss.policy_loss", mode, "actor.policy_loss.loss_mode")
    low, high = lg.value(f"{A}.clip_ratio_low"), lg.value(f"{A}.clip_ratio_high")
    ratio = lg.value(f"{A}.clip_ratio")
    if low is not None and high is not None:
        lg.drop(f"{A}.clip_ratio", "verl uses clip_ratio_low / clip_ratio_high when they are set")
    else:
        lg.take(f"{A}.clip_ratio", "algorithm.loss.clip_low, algorithm.loss.clip_high")
    clip_low = low if low is not None else ratio
    clip_high = high if high is not None else ratio
    lg.take(f"{A}.clip_ratio_low", "algorithm.loss.clip_low")
    lg.take(f"{A}.clip_ratio_high", "algorithm.loss.clip_high")
    lg.put("algorithm.loss.clip_low", float(clip_low), "actor.clip_ratio_low")
    lg.put("algorithm.loss.clip_high", float(clip_high), "actor.clip_ratio_high")
    dual = lg.take(f"{A}.clip_ratio_c", "algorithm.loss.clip_ratio_c")
    lg.put("algorithm.loss.clip_ratio_c", float(dual), "actor.clip_ratio_c (dual clip)")
    agg = lg.take(f"{A}.loss_agg_mode", "algorithm.loss.agg")
    lg.put("algorithm.loss.agg", agg, "actor.loss_agg_mode")
    scale = lg.value(f"{A}.loss_scale_factor")
    response = lg.value(f"{R}.response_length")
    if scale is None or (agg == "seq-mean-token-sum-norm" and scale == response):
        lg.drop(f"{A}.loss_scale_factor", "unset: seq-mean-token-sum-norm divides by the "
                "response length, as rlctl does (rollout.max_new_tokens)")
    elif agg != "seq-mean-token-sum-norm":
        lg.drop(f"{A}.loss_scale_factor", f"used only by seq-mean-token-sum-norm (agg is {agg})")
    else:
        lg.error(f"{A}.loss_scale_factor", f"a constant {scale} instead of the response length "
                 f"({response}): rlctl's seq-mean-token-sum-norm divides by "
                 "rollout.max_new_tokens", "remove loss_scale_factor")
    coef = lg.take(f"{A}.entropy_coeff", "algorithm.loss.entropy_coef")
    lg.put("algorithm.loss.entropy_coef", float(coef), "actor.entropy_coeff")
    options = {
        "sapo": {"tau_pos": f"{A}.tau_pos", "tau_neg": f"{A}.tau_neg"},
        "clip_cov": {k: f"{A}.policy_loss.{k}" for k in ("clip_cov_ratio", "clip_cov_lb",
                                                          "clip_cov_ub")},
        "kl_cov": {k: f"{A}.policy_loss.{k}" for k in ("kl_cov_ratio", "ppo_kl_coef")},
    }
    for loss, keys in options.items():
        for option, key in keys.items():
            if loss == mode:
                value = lg.take(key, f"algorithm.loss.options.{option}")
                lg.put(
                    f"algorithm.loss.options.{option}",
                    value,
                    key.removeprefix("actor_rollout_ref."),
                )
            else:
                lg.drop(key, f"used only by the {loss} policy loss")
    _rollout_correction(lg)


def _rollout_correction(lg: Ledger) -> None:
    rc = "algorithm.rollout_correction"
    mode = lg.value(f"{rc}.rollout_is")
    neutral = {f"{rc}.rollout_rs": None, f"{rc}.bypass_mode": False,
               f"{rc}.rollout_is_batch_normalize": False, f"{rc}.loss_type": "ppo_clip"}
    if mode is None:
        lg.drop(f"{rc}.rollout_is", "off")
        lg.drop_tree(rc, "rollout correction is off (rollout_is = null)")
        return
    if mode != "token":
        lg.error(f"{rc}.rollout_is", f'"{mode}" importance weights: rlctl has token-level '
                 "truncated importance sampling only", 'use rollout_is=token, or remove it')
        return
    for key, value in neutral.items():
        if lg.value(key) != value:
            lg.error(key, f"{lg.value(key)!r}: rlctl's truncated IS has no such variant",
                     f"set it to {value!r}")
        else:
            lg.drop(key, f"at {value!r}")
    lg.take(f"{rc}.rollout_is", "algorithm.correction.method")
    lg.put("algorithm.correction.method", "truncated_is", "algorithm.rollout_correction.rollout_is")
    cap = lg.take(f"{rc}.rollout_is_threshold", "algorithm.correction.cap")
    lg.put(
        "algorithm.correction.cap", float(cap), "algorithm.rollout_correction.rollout_is_threshold"
    )
    lg.drop_tree(rc, "not used by token-level truncated IS")


# --------------------------------------------------------------------------- KL


def translate_kl(lg: Ledger) -> None:
    in_loss = bool(lg.take(f"{A}.use_kl_loss", "algorithm.kl.in"))
    in_reward = bool(lg.take("algorithm.use_kl_in_reward", "algorithm.kl.in"))
    loss_keys = [f"{A}.kl_loss_coef", f"{A}.kl_loss_type"]
    reward_keys = ["algorithm.kl_penalty", *lg.cfg.under("algorithm.kl_ctrl")]
    if in_loss and in_reward:
        lg.conflict(f"{A}.use_kl_loss", "the KL is both in the loss (actor.use_kl_loss) and in "
                 "the reward (algorithm.use_kl_in_reward); rlctl puts it in one place",
                 "turn one of them off")
        return
    if not (in_loss or in_reward):
        lg.put("algorithm.kl.in", "none", "actor.use_kl_loss = algorithm.use_kl_in_reward = false")
        for key in loss_keys + reward_keys:
            lg.drop(key, "the KL is off")
        return
    if in_loss:
        place, type_key, coef_key, unused = (
            "loss",
            f"{A}.kl_loss_type",
            f"{A}.kl_loss_coef",
            reward_keys,
        )
        lg.put("algorithm.kl.in", "loss", "actor.use_kl_loss")
    else:
        place, type_key, coef_key, unused = ("reward", "algorithm.kl_penalty",
                                             "algorithm.kl_ctrl.kl_coef", loss_keys)
        lg.put("algorithm.kl.in", "reward", "algorithm.use_kl_in_reward")
    for key in unused:
        lg.drop(key, f"the KL is in the {place}")
    kind = lg.take(type_key, "algorithm.kl.estimator")
    if kind not in KL_TYPES:
        why = ("straight-through KL gradients (the + suffix)" if str(kind).endswith("+")
               else "this KL estimator")
        lg.error(type_key, f'"{kind}": rlctl has no {why}',
                 f"use one of {', '.join(sorted(KL_TYPES))}")
        return
    lg.put("algorithm.kl.estimator", KL_TYPES[kind], type_key.removeprefix("actor_rollout_ref."))
    lg.put("algorithm.kl.coef", float(lg.take(coef_key, "algorithm.kl.coef")),
           coef_key.removeprefix("actor_rollout_ref."))
    if in_reward:
        ctl = lg.take("algorithm.kl_ctrl.type", "algorithm.kl.controller")
        if ctl not in ("fixed", "adaptive"):
            lg.error("algorithm.kl_ctrl.type", f'"{ctl}" KL controller', "use fixed or adaptive")
            return
        lg.put("algorithm.kl.controller", ctl, "algorithm.kl_ctrl.type")
        if ctl == "adaptive":
            target = lg.take("algorithm.kl_ctrl.target_kl", "algorithm.kl.target")
            horizon = lg.take("algorithm.kl_ctrl.horizon", "algorithm.kl.horizon")
            lg.put("algorithm.kl.target", float(target), "algorithm.kl_ctrl.target_kl")
            lg.put("algorithm.kl.horizon", int(horizon), "algorithm.kl_ctrl.horizon")
        else:
            lg.drop("algorithm.kl_ctrl.target_kl", "used only by the adaptive controller")
            lg.drop("algorithm.kl_ctrl.horizon", "used only by the adaptive controller")
