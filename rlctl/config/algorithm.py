"""The ``[algorithm]`` sections of the recipe: estimator, losses, KL, optimizer, batch
semantics, the off-policy bound and its correction, DAPO's shaping.

Everything here changes the math (unlike ``[engines.*]``); :class:`rlctl.config.recipe.Recipe`
holds it as ``recipe.algorithm``. Every field has a one-line docstring (the schema description).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from rlctl.config.correction_checks import check_correction
from rlctl.config.section import Options, Section
from rlctl.config.strict import LAX

# Adam's betas are decay rates: 1 would never forget, above 1 diverges.
Beta = Annotated[float, Field(ge=0, lt=1)]


class LossSection(Section):
    policy_loss: str = "vanilla"
    """Registered policy loss (``vanilla`` = PPO clip; ``gspo``, ``cispo``, ...)."""
    clip_low: float = Field(0.2, ge=0)
    """Lower clip of the importance ratio (1 - clip_low)."""
    clip_high: float = Field(0.2, ge=0)
    """Upper clip of the importance ratio (1 + clip_high); 0.28 is DAPO's clip-higher."""
    clip_ratio_c: float | None = Field(3.0, gt=1)
    """Dual-clip bound for negative advantages; ``None`` disables dual-clip."""
    agg: Literal[
        "token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"
    ] = "token-mean"
    """How per-token losses reduce to one number."""
    entropy_coef: float = Field(0.0, ge=0)
    """Weight of the entropy bonus."""
    options: Options = {}
    """Extra options of the selected policy loss, validated by its option model."""


class KLSection(Section):
    apply_in: Literal["none", "loss", "reward"] = Field("none", alias="in")
    """Where the KL to the reference policy enters: ``none``, the ``loss`` or the ``reward``."""
    estimator: Literal["k1", "k2", "k3", "abs"] = "k3"
    """KL estimator (k3 = low-variance KL, k2 = mse)."""
    coef: float = Field(0.001, ge=0)
    """KL coefficient (initial value when adaptive)."""
    controller: Literal["fixed", "adaptive"] = "fixed"
    """Keep ``coef`` fixed or adapt it towards ``target``."""
    target: PositiveFloat = 6.0
    """Target KL of the adaptive controller."""
    horizon: PositiveInt = 10000
    """Horizon of the adaptive controller."""


class OptimSection(Section):
    name: Literal["adamw", "adam", "sgd"] = "adamw"
    """Optimizer."""
    lr: PositiveFloat = 1e-6
    """Peak learning rate of the actor."""
    weight_decay: float = Field(0.0, ge=0)
    """Decoupled weight decay."""
    betas: Annotated[tuple[Beta, Beta], LAX] = (0.9, 0.999)
    """Adam betas, each in [0, 1)."""
    eps: PositiveFloat = 1e-8
    """Adam epsilon."""
    grad_clip: float | None = Field(1.0, gt=0)
    """Clip the global gradient norm to this value; ``None`` disables clipping."""
    scheduler: Literal["constant", "linear", "cosine"] = "constant"
    """Learning-rate schedule after warm-up."""
    warmup_steps: int = Field(0, ge=0)
    """Optimizer steps of linear warm-up."""
    min_lr_ratio: float = Field(0.0, ge=0, le=1)
    """Final learning rate as a fraction of ``lr`` (linear and cosine)."""


class StalenessSection(Section):
    policy: str = "on_policy"
    """Registered staleness policy: ``on_policy`` (sync) or ``bounded`` (streaming)."""
    options: Options = {}
    """Options of the selected policy (``bounded``: ``max_staleness``, ``on_stale``, ...)."""
    partial_rollout: Literal["finish", "resume"] = "finish"
    """At a weight update, requests in flight ``finish`` on the weights they started with, or are
    aborted and ``resume`` on the new weights keeping their tokens, each span tagged with its
    version (streaming with the ``vllm`` / ``sglang`` engines; docs/streaming.md)."""


class CorrectionSection(Section):
    """Off-policy correction: weights on the policy loss of tokens the rollout engine's
    weights (``pi_behav``) generated, against the weights training them (``pi_prox``, the
    old-log-prob pass); docs/streaming.md gives the math of each method."""

    method: Literal["auto", "none", "truncated_is", "masked_is", "decoupled_ppo"] = "auto"
    """``auto``: ``none`` in sync training, ``decoupled_ppo`` (cap 5) when streaming."""
    cap: float | None = Field(None, gt=0)
    """``truncated_is``: weight cap (default 2); ``decoupled_ppo``: weights above it are masked out
    (> 1, default 5)."""
    low: float = Field(0.5, ge=0)
    """``masked_is``: ratios below this are masked out."""
    high: float = Field(2.0, gt=0)
    """``masked_is``: ratios above this are masked out."""
    level: Literal["token", "sequence"] = "token"
    """``masked_is``: mask single tokens, or whole responses by their geometric-mean ratio."""

    @model_validator(mode="after")
    def _keys_fit_the_method(self) -> CorrectionSection:
        check_correction(self)
        return self


class DynamicSamplingSection(Section):
    """DAPO's dynamic sampling: train only on groups whose rewards differ.

    A group whose responses all score alike (all right, all wrong) has zero group-relative
    advantage and so no gradient. With this on, each step draws prompts in batches of
    ``prompts_per_draw``, drops such groups, and draws again until ``prompts_per_step``
    groups are kept (extra kept groups are dropped, first drawn first kept).
    """

    enabled: bool = False
    """Filter out groups whose ``metric`` is the same for every response."""
    metric: str = "score"
    """What must vary in a group: ``score`` (the sum), a reward's name, or ``<reward>/<part>``."""
    prompts_per_draw: PositiveInt | None = None
    """Prompts per draw (verl's ``data.gen_batch_size``); ``None``: ``prompts_per_step``."""
    max_draws: PositiveInt = 10
    """Most draws per step (verl's ``max_num_gen_batches``); past it the step fails."""


class OverlongSection(Section):
    """DAPO's overlong handling: soft punishment of long responses, filtering of truncated ones."""

    buffer_len: int = Field(0, ge=0)
    """Soft punishment: past ``max_tokens - buffer_len`` tokens reward falls linearly; 0 = off."""
    penalty_factor: float = Field(1.0, ge=0)
    """Penalty at ``max_tokens`` (it grows linearly over the buffer, up to this)."""
    max_tokens: PositiveInt | None = None
    """Where the buffer ends (verl's ``max_resp_len``); ``None``: ``rollout.max_new_tokens``."""
    filter: bool = False
    """Overlong filtering: truncated responses (no eos) are masked out of the actor loss."""


class AlgorithmSection(Section):
    estimator: str = "grpo"
    """Registered advantage estimator (``grpo``, ``rloo``, ``gae``, ...)."""
    prompts_per_step: PositiveInt = 64
    """Prompts per training step (the global batch, before ``group_size``)."""
    group_size: PositiveInt = 8
    """Responses sampled per prompt (n)."""
    minibatches: PositiveInt = 1
    """Minibatches per epoch: optimizer steps per epoch of one training step."""
    epochs: PositiveInt = 1
    """Passes over each step's samples (PPO epochs)."""
    gamma: float = Field(1.0, ge=0, le=1)
    """Discount factor (GAE, REINFORCE++)."""
    lam: float = Field(1.0, ge=0, le=1)
    """GAE lambda."""
    norm_adv_by_std: bool = True
    """Divide group-relative advantages by the group std (GRPO); ``dr_grpo`` ignores it."""
    shuffle_minibatches: bool = True
    """Shuffle samples between minibatches each epoch (seeded)."""
    loss: LossSection = LossSection()
    """Policy-loss settings."""
    kl: KLSection = KLSection()
    """KL to the reference policy."""
    optim: OptimSection = OptimSection()
    """Actor optimizer and learning-rate schedule."""
    staleness: StalenessSection = StalenessSection()
    """How old (in weight updates) a trained sample may be: the off-policy bound."""
    correction: CorrectionSection = CorrectionSection()
    """Off-policy correction of the policy loss (importance weights against the rollout)."""
    estimator_options: Options = {}
    """Extra options of the selected estimator, validated by its option model."""
    dynamic_sampling: DynamicSamplingSection = DynamicSamplingSection()
    """DAPO's dynamic sampling (drop groups whose rewards are all equal, draw again)."""
    overlong: OverlongSection = OverlongSection()
    """DAPO's overlong reward shaping and overlong filtering."""
