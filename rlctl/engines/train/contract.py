"""The contract of a training engine (``[engines.train] backend``), one instance per rank.

The trainer's workers build one engine per role and rank from a :class:`ModelEngineSpec`
and call it with :class:`~rlctl.engines.train.batch.ModelBatch`es. Per-token results are
``[B, R]`` tensors aligned with ``batch.responses`` (see :mod:`rlctl.engines.train.batch`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from rlctl.config.plugin_options import OptionsSpec

if TYPE_CHECKING:
    import torch

    from rlctl.config.recipe import Recipe
    from rlctl.engines.train.batch import ModelBatch

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
    """Everything an engine needs to build itself on one rank; its validated
    ``[engines.train.options]`` are :meth:`options_as` (``spec.options_as(FSDPOptions)``)."""

    options_key: ClassVar[str] = "engines.train.options"

    role: Role
    """``actor`` (trained policy), ``ref`` (frozen policy) or ``critic`` (value model)."""
    recipe: Recipe
    """The whole recipe (model, optimizer, micro-batch sizes, engine options)."""
    rank: int = 0
    """This process's rank in the engine's process group."""
    world_size: int = 1
    """Ranks of the engine's process group."""
    device: str = "cpu"
    """``cpu`` or ``cuda[:i]``; picks gloo or NCCL."""


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
