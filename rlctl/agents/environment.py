"""The ``environment`` plugin kind: Gym-style episodes the ``env`` agent loop steps.

A registered target is ``target(options) -> Environment``, called once per episode (so an
environment keeps its episode state on ``self``). Its methods may be plain or ``async``:

* ``reset(record: PromptRecord) -> str`` - start the episode for this prompt; returns the
  first observation (``""`` for none; with a chat template it must be ``""``: put it in the
  prompt);
* ``step(action: str) -> StepResult`` (or a ``(observation, reward, done, info)`` tuple) -
  the model's turn as text (special tokens removed);
* ``close()`` - optional, called when the episode ends, also on errors.

A synchronous ``step`` runs inline on the worker's event loop: make slow steps ``async`` so
that ``step_timeout_s`` can cut them off.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rlctl.agents.contract import PromptRecord


@dataclass(frozen=True)
class StepResult:
    """What one step returns."""

    observation: str
    """What the model reads next (not appended after the last step)."""
    reward: float = 0.0
    """This step's reward."""
    done: bool = False
    """The episode is over."""
    info: dict[str, Any] = field(default_factory=dict)
    """Anything else (passed to reward functions as ``extra["env_info"]``)."""

    @classmethod
    def of(cls, value: Any) -> StepResult:
        """Accept a :class:`StepResult` or a Gym-style ``(obs, reward, done, info)`` tuple
        (``obs`` text, ``reward`` a finite number, ``done`` a bool, ``info`` a dict or
        ``None``); anything else raises ``TypeError`` / ``ValueError`` saying what is wrong."""
        if isinstance(value, StepResult):
            return value
        if isinstance(value, tuple) and len(value) == 4:
            obs, reward, done, info = value
            if not isinstance(obs, str):
                raise TypeError(f"the observation (item 0) must be a str, got "
                                f"{type(obs).__name__}")
            try:
                reward = float(reward)  # numpy scalars too
            except (TypeError, ValueError):
                raise TypeError(f"the reward (item 1) must be a number, got "
                                f"{type(reward).__name__}") from None
            if not math.isfinite(reward):
                raise ValueError(f"the reward (item 1) must be finite, got {reward}")
            if not isinstance(done, (bool, int)) and getattr(done, "shape", None) != ():
                raise TypeError(f"done (item 2) must be a bool, got {type(done).__name__}")
            if info is not None and not isinstance(info, dict):
                raise TypeError(f"info (item 3) must be a dict, got {type(info).__name__}")
            return cls(obs, reward, bool(done), dict(info or {}))
        raise TypeError(
            f"an environment's step must return a StepResult or a 4-tuple "
            f"(observation, reward, done, info), got {type(value).__name__}"
        )


@runtime_checkable
class Environment(Protocol):
    """An episode (see the module docstring)."""

    def reset(self, record: PromptRecord) -> Any: ...

    def step(self, action: str) -> Any: ...


@runtime_checkable
class ClosingEnvironment(Environment, Protocol):
    """An environment with the optional ``close()`` (plain or ``async``): called when its
    episode ends, also on errors. Without it there is nothing to close."""

    def close(self) -> Any: ...


async def close_environment(env: Environment) -> None:
    """End an episode: the environment's ``close()`` when it has one (see
    :class:`ClosingEnvironment`)."""
    if isinstance(env, ClosingEnvironment):
        await maybe_await(env.close())


async def maybe_await(value: Any) -> Any:
    """The value, awaited when a method was ``async``."""
    return await value if inspect.isawaitable(value) else value
