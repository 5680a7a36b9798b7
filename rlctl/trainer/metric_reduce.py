"""Scalar metric reduction across workers.

Workers never send tensors to the controller: they send *partials* per metric name,
``(sum, count, min, max)`` floats, and the controller merges them. Means are exact over
all ranks (sum/count), not means of means.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

Partial = tuple[float, float, float, float]  # sum, count, min, max


def partial_of(values: Iterable[float]) -> Partial:
    vals = [float(v) for v in values]
    if not vals:
        return (0.0, 0.0, math.inf, -math.inf)
    return (sum(vals), float(len(vals)), min(vals), max(vals))


def scalar_partial(value: float, weight: float = 1.0) -> Partial:
    """A per-rank scalar (e.g. a loss) weighted by how many samples it covers."""
    return (float(value) * weight, float(weight), float(value), float(value))


def merge(partials: Iterable[Mapping[str, Partial]]) -> dict[str, Partial]:
    out: dict[str, Partial] = {}
    for part in partials:
        for name, (s, c, lo, hi) in part.items():
            if name in out:
                s0, c0, lo0, hi0 = out[name]
                out[name] = (s0 + s, c0 + c, min(lo0, lo), max(hi0, hi))
            else:
                out[name] = (s, c, lo, hi)
    return out


def finalize(
    merged: Mapping[str, Partial], *, with_extremes: Iterable[str] = ()
) -> dict[str, float]:
    """``name`` -> mean; names listed in ``with_extremes`` get ``/mean``, ``/max``, ``/min``."""
    extremes = set(with_extremes)
    out: dict[str, float] = {}
    for name, (s, c, lo, hi) in merged.items():
        if c <= 0:
            continue
        if name in extremes:
            out[f"{name}/mean"] = s / c
            out[f"{name}/max"] = hi
            out[f"{name}/min"] = lo
        else:
            out[name] = s / c
    return out
