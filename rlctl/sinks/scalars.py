"""Turning whatever a step reports (floats, ints, numpy or torch scalars) into floats."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def to_float(value: Any) -> float | None:
    """A Python float for a scalar-like value, or ``None`` when it is not a scalar.

    Accepts bool/int/float and anything with ``.item()`` returning a number (0-d numpy
    arrays, numpy scalars, one-element torch tensors) without importing numpy or torch.
    """
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item):
        try:
            inner = item()
        except (ValueError, RuntimeError):  # more than one element
            return None
        if isinstance(inner, (bool, int, float)):
            return float(inner)
    return None


def scalar_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The scalar entries of ``metrics`` as floats; non-scalars are dropped."""
    out: dict[str, float] = {}
    for name, value in metrics.items():
        number = to_float(value)
        if number is not None:
            out[str(name)] = number
    return out


def json_number(value: float) -> float | None:
    """JSON has no NaN/inf: non-finite values are written as ``null``."""
    return value if math.isfinite(value) else None
