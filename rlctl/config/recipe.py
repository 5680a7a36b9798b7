"""The recipe's sections as pydantic models.

The *algorithm* (what is optimised) lives in ``[algorithm]``, ``[rollout]``, ``[[rewards]]``;
the *engines* (how it runs) live in ``[engines.*]``, ``[data_plane]``, ``[resources]``.
Changing anything under ``[engines.*]``, ``[data_plane]`` or ``[resources]`` must not change
the math. Every field has a type, a default where one makes sense and a one-line docstring
(``use_attribute_docstrings`` turns it into the schema description; a test enforces it).

The ``options`` tables are plain dicts here; :mod:`rlctl.config.plugin_options` validates
each against the option model that the selected plugin registered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from rlctl.config.correction_checks import check_correction, check_tis_cap
from rlctl.config.strict import LAX, STRICT_CONFIG


class Section(BaseModel):
    """Base of every recipe section: unknown keys are errors, values immutable, numbers
    strict and finite (:mod:`rlctl.config.strict`)."""

    model_config = ConfigDict(**STRICT_CONFIG, populate_by_name=True)


Options = dict[str, Any]


def _non_empty_path(value: Any) -> Any:
    # pydantic turns "" into Path("."): `-s data.train=` would silently mean the current directory.
    if isinstance(value, str) and not value.strip():
        raise ValueError(
            "an empty path is not a path; give a file or directory (or remove the key)"
        )
    return value


FilePath = Annotated[Path, LAX, BeforeValidator(_non_empty_path)]

# torch.manual_seed takes 64 bits, and workers derive their seeds from run.seed by
# arithmetic (seed * 100003 + step ...): 32 bits keep every derived seed in range.
MAX_SEED = 2**32 - 1
# Longer names break file-system limits (255 bytes) once suffixes are added.
MAX_RUN_NAME = 128
# Adam's betas are decay rates: 1 would never forget, above 1 diverges.
Beta = Annotated[float, Field(ge=0, lt=1)]

# --------------------------------------------------------------------------- run & model


class RunSection(Section):
    name: str = Field("rlctl-run", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                      max_length=MAX_RUN_NAME)
    """Run name; the run directory is ``<output_dir>/<name>``."""
    seed: int = Field(0, ge=0, le=MAX_SEED)
    """Seed for model init, data order, sampling and dropout."""
    output_dir: FilePath = Path("runs")
    """Directory that holds run directories."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where models run: ``auto`` picks CUDA when available, else CPU (gloo)."""


class TinyModelSection(Section):
    """Shape of the offline tiny Qwen3 model built when ``model.path = "tiny"``."""

    hidden_size: PositiveInt = 64
    """Hidden size of the tiny Qwen3 model."""
    intermediate_size: PositiveInt = 128
    """MLP width of the tiny Qwen3 model."""
    num_hidden_layers: PositiveInt = 2
    """Number of transformer layers."""
    num_attention_heads: PositiveInt = 4
    """Number of attention heads."""
    num_key_value_heads: PositiveInt = 2
    """Number of key/value heads (GQA)."""
    head_dim: PositiveInt = 16
    """Dimension of each attention head."""
    max_position_embeddings: PositiveInt = 64
    """Longest sequence (prompt + response) the tiny model accepts."""


class ModelSection(Section):
    path: str = "tiny"
    """Policy weights: a local HF directory or hub id, or ``tiny`` for an offline random-init tiny
    Qwen3."""
    tokenizer: str | None = None
    """Tokenizer directory or id; defaults to ``path`` (``tiny`` builds a character tokenizer
    offline)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"
    """Parameter dtype of the policy for training and rollout."""
    trust_remote_code: bool = False
    """Allow model code from the checkpoint (off: configs never execute code)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory."""
    tiny: TinyModelSection = TinyModelSection()
    """Architecture of the tiny model (used only when ``path = "tiny"``)."""


class CriticSection(Section):
    enabled: bool = False
    """Train a value model (needed by ``gae``)."""
    path: str | None = None
    """Critic weights; defaults to ``model.path`` with a fresh value head."""
    lr: PositiveFloat = 1e-5
    """Critic learning rate."""
    cliprange_value: PositiveFloat = 0.5
    """Clip range of the value loss around the old values."""
    warmup_steps: int = Field(0, ge=0)
    """Steps during which only the critic is updated."""


# --------------------------------------------------------------------------- data


class DataSection(Section):
    """Where prompts come from: files (``train`` / ``val``) or a synthetic ``task``.

    Files are ``.parquet`` (verl's layout), ``.jsonl`` (one JSON object per line) or a
    directory written by HF datasets' ``save_to_disk`` (read with ``load_from_disk``; needs
    ``pip install datasets``; a ``DatasetDict`` directory must be narrowed to one split); a
    list concatenates files in order, like verl's ``train_files``. Every format maps columns
    the same way: ``prompt_key`` holds chat messages or plain text, ``answer_key`` a struct
    with a ``ground_truth`` field (or the bare answer), an optional ``data_source`` column
    names the dataset for rewards, and other columns ride along.
    """

    train: FilePath | list[FilePath] | None = None
    """Training prompts: a .parquet (verl layout) or .jsonl file, a HF datasets directory
    (save_to_disk), or a list of them (concatenated)."""
    val: FilePath | list[FilePath] | None = None
    """Validation prompts, in the same formats as ``train``."""
    task: str | None = None
    """A registered synthetic task instead of prompt files (e.g. ``count_digits``)."""
    task_options: Options = {}
    """Options of the synthetic task, validated by the task's option model."""
    prompt_key: str = "prompt"
    """Column holding the prompt (chat messages or plain text)."""
    answer_key: str = "reward_model"
    """Column holding the ground truth handed to reward functions."""
    max_prompt_tokens: PositiveInt = 512
    """Prompts longer than this are rejected when loaded (never silently truncated)."""
    apply_chat_template: bool = True
    """Format chat-message prompts with the tokenizer's chat template when it has one."""
    shuffle: bool = True
    """Shuffle prompts each epoch (seeded by ``run.seed``)."""
    val_size: int = Field(64, ge=0)
    """Number of validation prompts drawn from a synthetic task."""


# --------------------------------------------------------------------------- algorithm


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
    tis_cap: float | None = Field(None, gt=0)
    """Old spelling of ``[algorithm.correction] method = "truncated_is"``, ``cap = C``; still read
    as that."""
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
    old_log_prob_pass: Literal["auto", "always"] = "auto"
    """``auto``: skip the old log-prob forward when the update is provably on-policy and take them
    from the update's own forward (docs/trainer.md); ``always``: run it every step."""

    @model_validator(mode="after")
    def _tis_cap_or_correction(self) -> AlgorithmSection:
        check_tis_cap(self)
        return self


class ToolSection(Section):
    name: str
    """Registered tool."""
    options: Options = {}
    """Options of the tool, validated by its option model."""


class EnvironmentSection(Section):
    name: str
    """Registered environment."""
    options: Options = {}
    """Options of the environment, validated by its option model."""


class RolloutSection(Section):
    max_new_tokens: PositiveInt = 256
    """Most tokens generated per response."""
    temperature: float = Field(1.0, ge=0)
    """Sampling temperature (0 = greedy)."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling threshold."""
    top_k: int = Field(0, ge=0)
    """Top-k sampling; 0 disables it."""
    agent_loop: str = "single_turn"
    """Registered agent loop that turns a prompt session into outputs."""
    agent_loop_options: Options = {}
    """Options of the agent loop (turn / token / time limits), validated by its option model."""
    tools: list[ToolSection] = []
    """Tools offered to the model by the ``tool`` agent loop (``[[rollout.tools]]``)."""
    tool_parser: str | None = None
    """Registered tool-call parser of the ``tool`` loop; ``None`` = ``hermes``."""
    environment: EnvironmentSection | None = None
    """The environment the ``env`` agent loop steps (``[rollout.environment]``)."""
    val_temperature: float = Field(0.0, ge=0)
    """Sampling temperature for validation."""
    val_group_size: PositiveInt = 1
    """Responses per validation prompt."""


class RewardSection(Section):
    name: str
    """Registered reward function."""
    weight: float = 1.0
    """Weight of this reward in the summed score."""
    options: Options = {}
    """Options of the reward function, validated by its option model."""


# --------------------------------------------------------------------------- engines


class TrainEngineSection(Section):
    backend: str = "fsdp"
    """Registered model engine for actor, reference and critic (``fsdp``, ``megatron``)."""
    ranks: PositiveInt = 1
    """Processes (devices) the training engine spans; data parallel unless options shard further."""
    micro_batch_size: PositiveInt = 8
    """Samples per forward/backward per rank (gradient accumulation covers the rest)."""
    log_prob_micro_batch_size: PositiveInt = 32
    """Samples per forward when computing log-probs or values."""
    options: Options = {}
    """Engine options, validated by the engine's option model (e.g. FSDP mixed precision)."""


class RolloutEngineSection(Section):
    backend: str = "hf"
    """Registered rollout engine (``hf``, ``vllm``, ``sglang``)."""
    replicas: PositiveInt = 1
    """Rollout engine replicas (agent-loop workers share them)."""
    agent_workers: PositiveInt = 1
    """AgentLoop worker processes."""
    weight_sync: str | None = None
    """Registered weight-sync method; ``None`` takes the engine's default."""
    weight_sync_options: Options = {}
    """Options of the weight sync (named, or the engine's default), checked by its model."""
    options: Options = {}
    """Engine options, validated by the engine's option model."""


class RewardEngineSection(Section):
    """How model rewards (``[[rewards]]`` whose function is a reward model) run."""

    workers: PositiveInt = 1
    """Reward-model worker processes (each loads every reward model; samples split over them)."""


class EnginesSection(Section):
    train: TrainEngineSection = TrainEngineSection()
    """Training engine (how actor, reference and critic run)."""
    rollout: RolloutEngineSection = RolloutEngineSection()
    """Rollout engine (how responses are generated)."""
    reward: RewardEngineSection = RewardEngineSection()
    """Reward-model workers (used only when a reward is a model)."""


class DataPlaneSection(Section):
    backend: str = "ray"
    """Registered data-plane backend (``memory``, ``ray``, ``transferqueue``)."""
    options: Options = {}
    """Backend options, validated by the backend's option model."""


class ResourcesSection(Section):
    mode: Literal["ray", "local"] = "ray"
    """``ray``: worker groups are Ray actors; ``local``: every role in the controller's process."""
    address: str | None = None
    """Ray cluster address; ``None`` starts a local cluster bound to loopback."""
    num_cpus: PositiveInt | None = None
    """Logical CPUs for a locally started Ray cluster; ``None`` counts the machine's."""
    nodes: PositiveInt = 1
    """Nodes of the cluster."""
    devices_per_node: PositiveInt = 1
    """Accelerators (or CPU ranks) per node."""
    placement: Literal["colocate", "split"] = "colocate"
    """``colocate``: rollout and training share devices; ``split``: separate devices."""


class ScheduleSection(Section):
    total_steps: PositiveInt = 100
    """Training steps to run."""
    eval_every: int = Field(0, ge=0)
    """Validate every N steps (0 = never)."""
    save_every: int = Field(0, ge=0)
    """Checkpoint every N steps (0 = only at the end when checkpoints are on)."""
    keep_last: PositiveInt = 3
    """Checkpoints kept on disk."""
    sample_timeout_s: PositiveFloat = 600.0
    """Seconds one rollout session may run (then it fails, naming its uid); a wait for a step's
    samples gives up 5 s later, naming the missing uids."""
    phase_timeout_s: float = Field(600.0, gt=0, allow_inf_nan=False)
    """Seconds one worker call may take (a phase: log-probs, advantages, an update, the weight
    sync, a checkpoint, the HF export); a rank that has not answered by then fails the run,
    named with its phase. The training ranks' collectives time out a minute later, so the
    controller names the stuck rank first."""
    start_timeout_s: float = Field(600.0, gt=0, allow_inf_nan=False)
    """Seconds the workers may take to start (load the model, join the process group)."""


class LoggingSection(Section):
    sinks: list[str] = ["console", "jsonl"]
    """Registered metric sinks."""
    sink_options: dict[str, Options] = {}
    """Per-sink options, keyed by sink name."""
    rollout_dump_samples: int = Field(0, ge=0)
    """Decoded samples per step written to ``rollouts/step_N.jsonl``."""
    progress: bool = True
    """Show a progress bar (``--quiet`` turns it off)."""


# --------------------------------------------------------------------------- the recipe


class Recipe(Section):
    """A complete rlctl recipe."""

    run: RunSection = RunSection()
    """Run identity, seed and output directory."""
    model: ModelSection = ModelSection()
    """Policy model and tokenizer."""
    critic: CriticSection = CriticSection()
    """Optional value model."""
    data: DataSection = DataSection()
    """Where prompts come from."""
    algorithm: AlgorithmSection = AlgorithmSection()
    """What is optimised: estimator, batch semantics, losses, KL, optimizer."""
    rollout: RolloutSection = RolloutSection()
    """Sampling semantics of the rollout."""
    rewards: list[RewardSection] = []
    """Weighted reward functions (``[[rewards]]``)."""
    engines: EnginesSection = EnginesSection()
    """How training and rollout run."""
    data_plane: DataPlaneSection = DataPlaneSection()
    """Where tensors live between phases."""
    resources: ResourcesSection = ResourcesSection()
    """Execution mode and cluster resources."""
    schedule: ScheduleSection = ScheduleSection()
    """How long to train and when to validate and save."""
    logging: LoggingSection = LoggingSection()
    """Metric sinks and rollout dumps."""
