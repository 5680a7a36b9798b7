"""The validation rules every recipe model shares: no coercion, no NaN, no infinity.

pydantic's lax mode reads ``true`` as the integer 1, ``1`` as a boolean and ``3.0`` as an
integer, and its floats accept ``nan`` and ``inf`` (both valid TOML). A NaN reward weight
once trained a whole run of NaN scores and exited 0; an infinite learning rate fails only on
the first optimizer step. So every recipe section and every built-in option model is
*strict* (a TOML integer is an integer, a boolean a boolean; an integer is still a fine
float) and *finite* (``allow_inf_nan=False``). Third-party option models get the same rules
by inheriting :class:`OptionsModel`; :func:`non_finite_paths` checks those that do not.

Strict mode would also refuse the strings TOML gives for paths and the lists it gives for
tuples: :data:`LAX` re-admits exactly those containers (their items stay strict).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Strict

STRICT_CONFIG = ConfigDict(
    extra="forbid",
    frozen=True,
    use_attribute_docstrings=True,
    strict=True,
    allow_inf_nan=False,
)
"""Unknown keys are errors, values are immutable, numbers are strict and finite."""

LAX = Strict(False)
"""Annotate a ``Path`` or ``tuple`` field with this: TOML has only strings and arrays."""


class OptionsModel(BaseModel):
    """Base of a plugin's option model: strict, finite, unknown keys are errors."""

    model_config = STRICT_CONFIG


class RolloutEngineOptions(OptionsModel):
    """Base of a rollout engine's option model (``[engines.rollout.options]``): it says how
    many devices one rollout worker's engine takes, which the placement plan reserves."""

    def devices_per_worker(self, replicas: int) -> int:
        """Devices of one rollout worker's engine with ``replicas`` replicas (1: the engine
        runs in the worker's own process, on its one device)."""
        return 1

    @property
    def starts_replicas(self) -> bool:
        """Whether the engine starts ``engines.rollout.replicas`` replicas of its own (servers,
        shared out to the agent workers); an engine in the worker's process has none."""
        return False


class TrainEngineOptions(OptionsModel):
    """Base of a training engine's option model (``[engines.train.options]``): it says how
    many ranks hold one model copy, which the batch arithmetic divides the ranks by."""

    @property
    def model_parallel_size(self) -> int:
        """Ranks that hold one copy of the model (1: pure data parallel)."""
        return 1


def allows_non_finite(model: type[BaseModel]) -> bool:
    """Whether ``model`` (its own config) lets NaN or infinity through."""
    return model.model_config.get("allow_inf_nan", True) is not False


def non_finite_paths(value: Any, loc: tuple[str | int, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Key paths of every NaN or infinite float inside nested dicts and lists."""
    if isinstance(value, float) and not math.isfinite(value):
        yield loc
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from non_finite_paths(item, (*loc, str(key)))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from non_finite_paths(item, (*loc, i))


@dataclass(frozen=True)
class LocalDirectory:
    """Field metadata: the value is a local directory that must exist when a run starts."""


LocalDir = Annotated[str, LocalDirectory()]
"""An option naming a local directory (a checkpoint to load...): ``rlctl train`` checks it
exists before any worker starts, naming the key (``config validate`` does not: a recipe is
often validated on another machine than the one it runs on)."""


def local_dir_fields(options: BaseModel) -> Iterator[tuple[str, str]]:
    """``(field, value)`` of every :data:`LocalDir` field of ``options`` that is set."""
    for name, info in type(options).model_fields.items():
        if any(isinstance(m, LocalDirectory) for m in info.metadata):
            value = getattr(options, name)
            if value is not None:
                yield name, str(value)
