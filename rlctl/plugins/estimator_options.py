"""Option models of the built-in advantage estimators (imported when the registry collects)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, PositiveFloat, model_validator

from rlctl.config.strict import LAX, STRICT_CONFIG


class _Options(BaseModel):
    model_config = STRICT_CONFIG


class GdpoOptions(_Options):
    """Options of ``gdpo`` (``[algorithm.estimator_options]``)."""

    reward_keys: Annotated[tuple[str, ...], LAX] = ()
    """Reward components normalised separately (keys of the reward functions' dict outputs); empty:
    the summed reward only."""
    reward_weights: Annotated[tuple[float, ...], LAX] | None = None
    """Weight of each component in ``reward_keys`` order; ``None`` weighs all 1."""

    @model_validator(mode="after")
    def _weights_match_keys(self) -> GdpoOptions:
        if self.reward_weights is not None and len(self.reward_weights) != len(self.reward_keys):
            raise ValueError(
                f"reward_weights has {len(self.reward_weights)} entries but reward_keys has "
                f"{len(self.reward_keys)}; give one weight per key"
            )
        return self


class GpgOptions(_Options):
    """Options of ``gpg``."""

    f_norm: PositiveFloat = 1.0
    """Divisor of the group-centred advantage (GPG's F_norm)."""


class OptimalTokenBaselineOptions(_Options):
    """Options of ``optimal_token_baseline`` and ``tir_optimal_token_baseline``."""

    handle_zero_tail: bool = True
    """Zero the baseline where a group's single longest response runs past all others."""
    baseline_epsilon: float = Field(1e-8, gt=0)
    """Added to the baseline's denominator (verl's 1e-8; the common ``epsilon`` is not used)."""
