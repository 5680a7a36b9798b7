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
    BeforeValidator,
    Field,
    PositiveFloat,
    PositiveInt,
)

from rlctl.config.algorithm import (  # noqa: F401 - the algorithm's sections, importable here too
    AlgorithmSection,
    CorrectionSection,
    DynamicSamplingSection,
    KLSection,
    LossSection,
    OptimSection,
    OverlongSection,
    StalenessSection,
)
from rlctl.config.lora import LoRASection
from rlctl.config.section import Options, Section
from rlctl.config.strict import LAX


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
    """Shape of the offline tiny Qwen3 model built when ``model.path`` is ``"tiny"`` or
    ``"tiny-chat"``."""

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
    max_position_embeddings: PositiveInt = 512
    """Longest sequence (prompt + response) the tiny model accepts; ``rlctl train`` refuses a
    ``rollout.max_new_tokens`` that leaves no room for a prompt (512: the default 256 new
    tokens fit with a long prompt)."""


class ModelSection(Section):
    path: str = "tiny"
    """Policy weights: a local HF directory or hub id, ``tiny`` for an offline random-init tiny
    Qwen3, or ``tiny-chat`` for the same model over a chat tokenizer with a chat template."""
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
    """Architecture of the tiny model (used only when ``path`` is ``"tiny"`` or
    ``"tiny-chat"``)."""
    lora: LoRASection = LoRASection()
    """LoRA adapters trained instead of every weight (``rank = 0``, the default: off)."""


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
    """Responses per validation prompt (``k`` of ``val/mean@k`` and ``val/pass@k``)."""
    val_correct_score: float = 1.0
    """A validation response counts as correct (``val/pass@1``, ``mean@k``, ``pass@k``, and
    ``rlctl eval``) when its score is at least this."""


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
    old_log_prob_pass: Literal["auto", "always"] = "auto"
    """``auto``: skip the old log-prob forward when the update's own forward runs on the step's
    weights (one epoch, one minibatch) and take them from it (docs/trainer.md); ``always``: run
    it every step. Either way the same numbers; ``rlctl config show`` prints what the plan chose
    and why."""
    advantage_pass: Literal["auto", "always"] = "auto"
    """``auto``: without a critic the actor update computes the advantages itself, from its own
    read of shards that keep every group whole (docs/trainer.md); ``always``: a separate
    advantage phase every step (the same advantages, one more call, read and write)."""
    options: Options = {}
    """Engine options, validated by the engine's option model (e.g. FSDP mixed precision)."""


class RolloutEngineSection(Section):
    backend: str = "hf"
    """Registered rollout engine (``hf``, ``vllm``, ``sglang``)."""
    replicas: PositiveInt = 1
    """Rollout engine replicas (servers) in all: each agent-loop worker runs ``replicas /
    agent_workers`` of them (it must divide)."""
    agent_workers: PositiveInt = 1
    """AgentLoop worker processes."""
    weight_sync: str | None = None
    """Registered weight-sync method; ``None`` takes the engine's default."""
    weight_sync_options: Options = {}
    """Options of the weight sync (named, or the engine's default), checked by its model."""
    lora_sync: Literal["adapter", "merged"] = "adapter"
    """With ``[model.lora]``: ``adapter`` moves only the adapters (the engine loads them),
    ``merged`` the base weights with the adapters merged in (for engines without adapters)."""
    release_memory: bool = True
    """While training runs, the rollout engine frees its weights (kept in CPU memory) and KV
    cache from the devices it shares with training, and takes them back for the weight sync
    and the next generation (vLLM sleep mode, SGLang's memory saver). Used where it can be:
    colocated placement, sync training, an engine that supports it, on CUDA; ``rlctl config
    show`` says whether and why. ``false``: keep them resident (no release, no wake-up cost)."""
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
    """Ray cluster to join: ``"auto"``, ``"host:port"`` or ``"ray://host:port"``; ``None``:
    ``RAY_ADDRESS`` when set (``ray job submit`` sets it), else a private local cluster bound
    to loopback."""
    num_cpus: PositiveInt | None = None
    """Logical CPUs for a locally started Ray cluster; ``None`` counts the machine's."""
    nodes: PositiveInt = 1
    """Nodes the run uses (the placement plan fills them in order)."""
    devices_per_node: PositiveInt = 1
    """Devices per node the run uses: accelerators, or CPU cores with ``accelerator = "cpu"``."""
    accelerator: Literal["auto", "gpu", "cpu"] = "auto"
    """What a device is: ``gpu`` (Ray's GPU resource), ``cpu`` (a core); ``auto``: from
    ``run.device``, else ``gpu`` when the cluster has GPUs."""
    placement: Literal["colocate", "split"] = "colocate"
    """``colocate``: rollout (and reward) workers share the training devices, taking turns;
    ``split``: they get devices of their own (``rlctl config show`` prints the plan)."""
    rollout_nodes: PositiveInt | None = None
    """With ``split``: the last N nodes go to rollout (and reward) workers; ``None``: their
    devices follow training's, node by node."""


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
    liveness_timeout_s: float = Field(25.0, ge=5, allow_inf_nan=False)
    """Seconds from a Ray worker's stop (SIGSTOP, a wedged process, a hung node) to the error
    that names it, whatever the phase bound: while the controller waits on a group it checks
    each rank it waits for every 2/5 of this and gives each check 1/5; three unanswered in a
    row fail the run. Lower names a stop sooner; below 5 s a loaded machine's slow answer
    would read as a stop."""


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
