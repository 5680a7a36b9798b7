"""The ``in_process`` weight sync (no network involved); ``vllm``'s is :mod:`rlctl.engines.rollout.vllm.weight_sync`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from rlctl.config.strict import STRICT_CONFIG


class InProcessOptions(BaseModel):
    """Options of ``in_process`` weight sync (none: it is a direct copy)."""

    model_config = STRICT_CONFIG


class InProcessWeightSync:
    """Copy the actor's full weights into a rollout engine living in the same process.

    ``actor`` is a model engine (``export_weights()``) or an already exported state dict;
    with several training ranks only rank 0 holds the full weights, so call it there.
    """

    def __init__(self, options: InProcessOptions | None = None) -> None:
        self.options = options or InProcessOptions()

    def __call__(self, actor: Any, rollout: Any, version: int) -> None:
        state = actor if isinstance(actor, Mapping) else actor.export_weights()
        if not state:
            raise ValueError(
                "in_process weight sync got an empty state dict: with several training "
                "ranks only rank 0 holds the full weights; sync from rank 0"
            )
        rollout.update_weights(state, version)
