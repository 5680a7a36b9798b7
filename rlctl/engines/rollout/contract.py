"""The contract of a rollout engine (``[engines.rollout] backend``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from rlctl.config.plugin_options import OptionsSpec

if TYPE_CHECKING:
    from rlctl.config.recipe import Recipe

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one response (the recipe's ``[rollout]`` semantics)."""

    max_new_tokens: int
    """Most tokens to generate."""
    temperature: float = 1.0
    """Softmax temperature; 0 = greedy."""
    top_p: float = 1.0
    """Nucleus threshold; 1 = off."""
    top_k: int = 0
    """Top-k; 0 = off."""
    stop_token_ids: tuple[int, ...] = ()
    """Tokens that end the response like an eos (kept in it): a tool loop stops at a call."""

    @classmethod
    def from_recipe(cls, recipe: Recipe, *, validation: bool = False) -> SamplingParams:
        r = recipe.rollout
        return cls(
            max_new_tokens=r.max_new_tokens,
            temperature=r.val_temperature if validation else r.temperature,
            top_p=r.top_p,
            top_k=r.top_k,
        )


@dataclass(frozen=True)
class Generation:
    """One sampled response."""

    token_ids: list[int]
    """Generated tokens, cut after the first eos or stop token (included)."""
    log_probs: list[float]
    """Log-prob of each generated token under the sampling distribution (same length)."""
    finish_reason: FinishReason
    """``stop`` when an eos or stop token ended it, ``length`` at ``max_new_tokens``."""
    weight_version: int
    """Policy version of the weights that generated it."""


@dataclass(frozen=True)
class RolloutEngineSpec(OptionsSpec):
    """Everything a rollout engine needs to build itself; its validated
    ``[engines.rollout.options]`` are :meth:`options_as`."""

    options_key: ClassVar[str] = "engines.rollout.options"

    recipe: Recipe
    """The whole recipe (model, rollout options)."""
    device: str = "cpu"
    """``cpu`` or ``cuda[:i]``."""
    seed: int = 0
    """Base seed of the sampler (identical outputs for identical seeds and requests)."""
    weight_sync_options: Any = None
    """The validated ``[engines.rollout.weight_sync_options]`` of the weight sync that will
    update this engine (``None``: none given). An engine whose servers must start ready for
    one transfer reads them (vLLM's ``--weight-transfer-config``); the sync itself gets the
    same object."""


@runtime_checkable
class RolloutEngine(Protocol):
    """Generates responses; its weights follow the actor through its weight sync.

    How weights get in is the weight sync's business (``sync(weights, engine, version)``,
    :mod:`rlctl.hookspecs`), through whatever public methods the engine offers it: the
    ``in_process`` sync calls ``update_weights(state_dict, version)`` (the ``hf`` engine),
    the server syncs use :class:`~rlctl.engines.rollout.server.engine.ServerRolloutEngine`'s
    requests. An engine only has to report the version it generates with.
    """

    def load(self) -> None: ...

    def generate_batch(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        top_k: int,
        seed: int | None,
    ) -> list[Generation]: ...

    async def generate(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> Generation: ...

    @property
    def weight_version(self) -> int: ...
