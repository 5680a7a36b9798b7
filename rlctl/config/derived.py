"""Numbers derived from a recipe, computed once and shown by ``rlctl config show``."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from rlctl.config.recipe import Recipe


@dataclass(frozen=True)
class Derived:
    """Batch arithmetic of one training step."""

    samples_per_step: int
    """prompts_per_step x group_size."""
    minibatch_size: int
    """Samples per optimizer step (global, across ranks)."""
    minibatch_size_per_rank: int
    """Samples per optimizer step on one training rank."""
    micro_batches_per_rank: int
    """Forward/backward passes per optimizer step on one rank (= gradient accumulation)."""
    grad_accumulation_steps: int
    """Micro-batches whose gradients add up before one optimizer step."""
    optimizer_steps_per_train_step: int
    """minibatches x epochs."""

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def derive(recipe: Recipe) -> Derived:
    """Compute the derived numbers; call only after the divisibility checks passed.

    Non-divisible inputs are floored here; :mod:`rlctl.config.checks` reports them.
    """
    alg, train = recipe.algorithm, recipe.engines.train
    samples = alg.prompts_per_step * alg.group_size
    minibatch = max(samples // alg.minibatches, 1)
    per_rank = max(minibatch // train.ranks, 1)
    micro = max(-(-per_rank // train.micro_batch_size), 1)
    return Derived(
        samples_per_step=samples,
        minibatch_size=minibatch,
        minibatch_size_per_rank=per_rank,
        micro_batches_per_rank=micro,
        grad_accumulation_steps=micro,
        optimizer_steps_per_train_step=alg.minibatches * alg.epochs,
    )
