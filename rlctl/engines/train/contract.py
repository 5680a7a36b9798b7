"""The contract of a training engine (``[engines.train] backend``), one instance per rank.

The trainer's workers build one engine per role and rank from a :class:`ModelEngineSpec`
and call it with :class:`~rlctl.engines.train.batch.ModelBatch`es. Per-token results are
``[B, R]`` tensors aligned with ``batch.responses`` (see :mod:`rlctl.engines.train.batch`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from rlctl.config.algorithm import OptimSection
from rlctl.config.lora import LoRASection
from rlctl.config.plugin_options import OptionsSpec
from rlctl.config.recipe import ModelSection

if TYPE_CHECKING:
    import torch

    from rlctl.config.loaded import LoadedRecipe
    from rlctl.engines.train.batch import ModelBatch
    from rlctl.models.lora import AdapterWeights

Role = Literal["actor", "ref", "critic"]

# loss_fn(outputs, fields_micro) -> (loss, metrics). ``outputs`` holds "log_probs" and
# "entropy" [b, R] (actor) or "values" [b, R] (critic), with grad; ``fields_micro`` is the
# caller's per-sample fields sliced to the micro-batch. The loss must already be divided by
# the GLOBAL normaliser (tokens or samples of the whole minibatch on all ranks): the engine
# sums gradients over micro-batches and ranks. A metric is a scalar (the engine reports its
# mean over micro-batches) or a token statistic ``(sum, count, min, max)`` (merged exactly);
# engines reduce them with :func:`rlctl.engines.train.metrics.reduce_micro_batches`.
LossFn = Callable[
    [dict[str, "torch.Tensor"], dict[str, "torch.Tensor"]],
    tuple["torch.Tensor", Mapping[str, "float | torch.Tensor | tuple[float, ...]"]],
]


@dataclass(frozen=True)
class ModelEngineSpec(OptionsSpec):
    """Everything an engine needs to build itself on one rank, and nothing else; its validated
    ``[engines.train.options]`` are :meth:`options_as` (``spec.options_as(FSDPOptions)``).
    Built by :meth:`from_loaded` (the trainer's workers and tests alike)."""

    options_key: ClassVar[str] = "engines.train.options"

    role: Role
    """``actor`` (trained policy), ``ref`` (frozen policy) or ``critic`` (value model)."""
    model: ModelSection
    """The policy model (``[model]``): the actor and the reference load it, the critic's trunk
    too unless :attr:`value_model_path` names another checkpoint."""
    rank: int = 0
    """This process's rank in the engine's process group."""
    world_size: int = 1
    """Ranks of the engine's process group."""
    device: str = "cpu"
    """``cpu`` or ``cuda[:i]``; picks gloo or NCCL."""
    seed: int = 0
    """``run.seed``: the weights of a random-init model, and each rank's dropout."""
    value_model_path: str | None = None
    """The critic's checkpoint (``[critic] path``); ``None``: the policy model's."""
    optimizer: OptimSection | None = None
    """The optimizer and schedule settings of a trained role (``None`` for the reference)."""
    lr: float = 0.0
    """Peak learning rate of this role (the actor's ``[algorithm.optim] lr``, the critic's
    ``[critic] lr``)."""
    total_optimizer_steps: int = 0
    """Optimizer steps of the whole run (the schedule's horizon)."""
    micro_batch_size: int = 8
    """Samples per forward/backward of an update."""
    log_prob_micro_batch_size: int = 32
    """Samples per forward of a log-prob or value pass."""
    entropy_in_loss: bool = False
    """The actor loss has an entropy bonus: the update's entropy needs its gradient."""
    lora: LoRASection | None = None
    """The actor's LoRA adapters (``[model.lora]`` with ``rank > 0``): the engine trains them
    instead of the weights, and its module with the adapters off is the KL reference
    (:class:`LoRAModelEngine`); ``None``: every weight trains (the reference and the critic
    always). Only engines registered with ``lora=True`` get one."""

    @classmethod
    def from_loaded(cls, loaded: LoadedRecipe, role: Role, *, rank: int = 0,
                    world_size: int = 1, device: str = "cpu") -> ModelEngineSpec:
        """The spec of ``role`` on ``rank`` of ``world_size`` from a validated recipe."""
        recipe = loaded.recipe
        alg, train = recipe.algorithm, recipe.engines.train
        trained = role != "ref"
        return cls(
            role=role, model=recipe.model, rank=rank, world_size=world_size, device=device,
            seed=recipe.run.seed,
            value_model_path=recipe.critic.path if role == "critic" else None,
            optimizer=alg.optim if trained else None,
            lr=(recipe.critic.lr if role == "critic" else alg.optim.lr) if trained else 0.0,
            total_optimizer_steps=(recipe.schedule.total_steps
                                   * loaded.derived.optimizer_steps_per_train_step),
            micro_batch_size=train.micro_batch_size,
            log_prob_micro_batch_size=train.log_prob_micro_batch_size,
            entropy_in_loss=role == "actor" and alg.loss.entropy_coef > 0,
            lora=recipe.model.lora if role == "actor" and recipe.model.lora.enabled else None,
            options=loaded.options_for(cls.options_key),
        )


@runtime_checkable
class ModelEngine(Protocol):
    """One rank of a training engine."""

    spec: ModelEngineSpec
    dp_rank: int
    """This rank's data-parallel rank (final after :meth:`init`). Model-parallel peers (one
    model copy split over ranks) share it and get the same batch; a pure data-parallel
    engine uses ``spec.rank``."""
    dp_size: int
    """Data-parallel groups of the process group (``spec.world_size`` for pure DP)."""
    writes_outputs: bool
    """Whether this rank puts results into the data plane and returns metrics: one rank per
    data-parallel group (its peers compute the same values)."""
    hf_config: Any
    """The model's ``transformers`` config (after :meth:`init`): the HF export writes it."""

    def init(self) -> None:
        """Join the process group, build and shard the model, build the optimizer."""
        ...

    def compute_log_prob(
        self, batch: ModelBatch, *, temperature: float, with_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(log_probs [B, R], entropy [B, R] | None)`` without grad."""
        ...

    def compute_values(self, batch: ModelBatch) -> torch.Tensor:
        """``values [B, R]`` without grad (critic)."""
        ...

    def train_minibatch(
        self,
        batch: ModelBatch,
        fields: Mapping[str, torch.Tensor],
        loss_fn: LossFn,
        *,
        temperature: float,
    ) -> dict[str, Any]:
        """One optimizer step over ``batch``; returns the loss function's metrics reduced over
        micro-batches (scalars averaged, token statistics merged) + ``grad_norm``, ``lr``."""
        ...

    def export_weights(self) -> dict[str, torch.Tensor]:
        """Full (unsharded) CPU weights, HF names."""
        ...

    def save(self, path: str) -> None: ...

    def load(self, path: str) -> None: ...

    def close(self) -> None:
        """Release the model and optimizer (the process group may be shared: it stays)."""
        ...


@runtime_checkable
class LoRAModelEngine(ModelEngine, Protocol):
    """A training engine that trains LoRA adapters (registered with ``lora=True``): with
    ``spec.lora`` set it trains only the adapters (and ``trainable_modules``), checkpoints
    only them and their optimizer state, and serves the KL reference and both weight syncs."""

    def compute_log_prob(
        self, batch: ModelBatch, *, temperature: float, with_entropy: bool,
        adapters: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """As :meth:`ModelEngine.compute_log_prob`; ``adapters=False``: of the base model (the
        same module with its adapters off: the KL reference, no second copy of the weights)."""
        ...

    def export_weights(self) -> dict[str, torch.Tensor]:
        """Full CPU weights, HF names, the adapters merged in (``lora_sync = "merged"``, the
        HF export); on rank 0, ``{}`` on the others. Every rank must call it."""
        ...

    def export_adapter(self) -> AdapterWeights | None:
        """The adapters under PEFT's names with their config (``lora_sync = "adapter"``): on
        rank 0, ``None`` on the others. Every rank must call it."""
        ...
