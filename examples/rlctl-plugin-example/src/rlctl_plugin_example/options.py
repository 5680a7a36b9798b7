"""Option models: they validate the recipe's ``options`` tables of this plugin's names.

rlctl checks ``[[rewards]] options`` and ``[algorithm.estimator_options]`` against these
models exactly as it checks its built-ins: unknown keys and wrong types are errors with the
key path. The docstring under each field becomes its description in ``rlctl config schema``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat

from rlctl.config.strict import OptionsModel


class NumericClosenessOptions(OptionsModel):
    """Options of the ``numeric_closeness`` reward (strict types, finite numbers)."""

    tolerance: PositiveFloat = 2.0
    """Distance from the answer at which the score falls to 0 (linear in between)."""
    missing_score: float = Field(0.0, ge=-1.0, le=1.0)
    """Score of a response that contains no number."""


class MedianBaselineOptions(OptionsModel):
    """Options of the ``median_baseline`` advantage estimator."""

    scale: Literal["none", "mad"] = "none"
    """Divide by the group's median absolute deviation (``mad``) or not (``none``)."""
