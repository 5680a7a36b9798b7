"""Numbers derived from a recipe, computed once and shown by ``rlctl config show``.

They are the numbers verl derives from its batch settings, named so that a migrated verl run
can be checked against them: ``prompts_per_minibatch`` is verl's ``ppo_mini_batch_size``,
``minibatch_size_per_rank`` its per-GPU (data-parallel rank) minibatch after normalisation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from rlctl.config.recipe import Recipe
from rlctl.config.strict import TrainEngineOptions


@dataclass(frozen=True)
class Derived:
    """Batch arithmetic of one training step."""

    samples_per_step: int
    """prompts_per_step x group_size."""
    prompts_per_minibatch: int
    """Prompts per optimizer step (verl's ``ppo_mini_batch_size``, counted before n)."""
    minibatch_size: int
    """Samples per optimizer step (global, across ranks)."""
    data_parallel_size: int
    """Ranks that each train on their own share of a minibatch (ranks / model-parallel size)."""
    minibatch_size_per_rank: int
    """Samples per optimizer step on one data-parallel rank."""
    micro_batches_per_rank: int
    """Forward/backward passes per optimizer step on one rank (= gradient accumulation)."""
    grad_accumulation_steps: int
    """Micro-batches whose gradients add up before one optimizer step."""
    optimizer_steps_per_train_step: int
    """minibatches x epochs."""

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def derive(recipe: Recipe, model_parallel_size: int = 1) -> Derived:
    """Compute the derived numbers; call only after the divisibility checks passed.

    ``model_parallel_size``: ranks that hold one model copy (the training engine's options
    say: TP x PP x CP for megatron, 1 for fsdp). Non-divisible inputs are floored here;
    :mod:`rlctl.config.checks` reports them.
    """
    alg, train = recipe.algorithm, recipe.engines.train
    samples = alg.prompts_per_step * alg.group_size
    minibatch = max(samples // alg.minibatches, 1)
    dp = max(train.ranks // max(model_parallel_size, 1), 1)
    per_rank = max(minibatch // dp, 1)
    micro = max(-(-per_rank // train.micro_batch_size), 1)
    return Derived(
        samples_per_step=samples,
        prompts_per_minibatch=max(alg.prompts_per_step // alg.minibatches, 1),
        minibatch_size=minibatch,
        data_parallel_size=dp,
        minibatch_size_per_rank=per_rank,
        micro_batches_per_rank=micro,
        grad_accumulation_steps=micro,
        optimizer_steps_per_train_step=alg.minibatches * alg.epochs,
    )


def model_parallel_size(train_options: object | None) -> int:
    """The validated ``[engines.train.options]``' ranks per model copy: what a
    :class:`~rlctl.config.strict.TrainEngineOptions` declares, else 1 (an engine whose
    options model does not derive from it is pure data parallel)."""
    return train_options.model_parallel_size if isinstance(train_options, TrainEngineOptions) \
        else 1
