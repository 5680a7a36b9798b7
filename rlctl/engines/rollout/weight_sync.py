"""The ``in_process`` weight sync (no network involved).

The server engines' syncs live next to their engines: :mod:`rlctl.engines.rollout.vllm.weight_sync`
and :mod:`rlctl.engines.rollout.sglang.weight_sync`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from rlctl.config.strict import STRICT_CONFIG
from rlctl.engines.rollout.contract import WeightSync
from rlctl.models.lora import AdapterWeights


class InProcessOptions(BaseModel):
    """Options of ``in_process`` weight sync (none: it is a direct copy)."""

    model_config = STRICT_CONFIG


class InProcessWeightSync(WeightSync):
    """Copy the actor's full weights into a rollout engine living in the same process.

    ``sync(weights, engine, version)``: ``weights`` is the exported state dict, or a model
    engine whose ``export_weights()`` gives it (tests); with several training ranks only
    rank 0 holds the full weights, so call it there. ``engine`` is one that loads a state
    dict itself, ``engine.update_weights(state_dict, version)`` (the ``hf`` engine). LoRA
    adapters (:class:`~rlctl.models.lora.AdapterWeights`) go to
    ``engine.update_adapter(adapters, version)``.
    """

    def __init__(self, options: InProcessOptions | None = None) -> None:
        self.options = options or InProcessOptions()

    def __call__(self, weights: Any, engine: Any, version: int) -> None:
        if isinstance(weights, AdapterWeights):
            engine.update_adapter(weights, version)
            return
        state = weights if isinstance(weights, Mapping) else weights.export_weights()
        if not state:
            raise ValueError(
                "in_process weight sync got an empty state dict: with several training "
                "ranks only rank 0 holds the full weights; sync from rank 0"
            )
        engine.update_weights(state, version)
