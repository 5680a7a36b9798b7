"""Weight sync implementations that live in the engines package (no network involved)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict


class InProcessOptions(BaseModel):
    """Options of ``in_process`` weight sync (none: it is a direct copy)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


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


class EngineReloadWeightSync:
    """Hand the exported weights to the rollout engine's own ``update_weights``.

    Used by server engines whose ``update_weights`` implements the transfer (``vllm``: a
    safetensors file plus ``/collective_rpc reload_weights`` between ``/pause`` and
    ``/resume``). Only the transports implemented so far are accepted; the others fail at
    construction, before any training step.
    """

    SUPPORTED_TRANSPORTS = ("file",)

    def __init__(self, options: Any = None) -> None:
        transport = getattr(options, "transport", "file")
        if transport not in self.SUPPORTED_TRANSPORTS:
            raise NotImplementedError(
                f"weight-sync transport {transport!r} is not implemented yet; use "
                f"{', '.join(self.SUPPORTED_TRANSPORTS)}"
            )
        self.options = options

    def __call__(self, weights: Any, rollout: Any, version: int) -> None:
        if not weights:
            raise ValueError("weight sync got an empty state dict: export from training rank 0")
        rollout.update_weights(weights, version)
