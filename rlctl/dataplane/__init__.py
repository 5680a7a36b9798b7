"""The data plane: where tensors live between workers (the controller only holds keys).

Importing this package is cheap (no torch/ray); backends load on :func:`open_data_plane`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlctl.dataplane.contract import DataPlane
from rlctl.dataplane.errors import (
    DataPlaneClosedError,
    DataPlaneError,
    DuplicateKeyError,
    FieldLayoutError,
    MissingFieldError,
    RowCountError,
    ShapeMismatchError,
    TagCountError,
    UnknownKeyError,
)
from rlctl.dataplane.replay_buffer import ReplayBuffer, RolloutFailure, SampleTimeout

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import BaseModel

__all__ = [
    "DataPlane",
    "DataPlaneClosedError",
    "DataPlaneError",
    "DuplicateKeyError",
    "FieldLayoutError",
    "MissingFieldError",
    "ReplayBuffer",
    "RolloutFailure",
    "RowCountError",
    "SampleTimeout",
    "ShapeMismatchError",
    "TagCountError",
    "UnknownKeyError",
    "open_data_plane",
]


def open_data_plane(
    backend: str, options: Mapping[str, Any] | BaseModel | None = None, *, run_id: str
) -> DataPlane:
    """Open the registered data plane ``backend`` with validated ``options``.

    ``options`` is an option model already validated (a loaded recipe's, the trainer's
    case) or a raw table, validated here (benchmarks, tests). ``ray`` expects Ray to be
    initialised by the caller; ``transferqueue`` also starts TransferQueue (and shuts it
    down in ``close()``); ``memory`` is single-process.
    """
    from pydantic import BaseModel, ValidationError

    from rlctl.registry import get_registry

    reg = get_registry().get("data_plane", backend)
    factory = reg.load()
    if isinstance(options, BaseModel):
        return factory(options, run_id=run_id)
    raw = dict(options or {})
    if reg.options is not None:
        try:
            validated = reg.options.model_validate(raw)
        except ValidationError as exc:
            raise DataPlaneError(
                f"[data_plane.options] for backend {backend!r} are invalid:\n{exc}"
            ) from None
    elif raw:
        raise DataPlaneError(f"data plane {backend!r} takes no options, got {sorted(raw)}")
    else:
        validated = None
    return factory(validated, run_id=run_id)
