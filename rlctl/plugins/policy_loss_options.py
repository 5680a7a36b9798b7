"""Option models of the built-in policy losses (imported when the registry collects)."""

from __future__ import annotations

from pydantic import BaseModel, Field, PositiveFloat, model_validator

from rlctl.config.strict import STRICT_CONFIG


class _Options(BaseModel):
    model_config = STRICT_CONFIG


class SapoOptions(_Options):
    """Options of ``sapo``."""

    tau_pos: PositiveFloat = 1.0
    """Gate temperature for tokens with positive advantage (>= 1 keeps updates stable)."""
    tau_neg: PositiveFloat = 1.05
    """Gate temperature for tokens with non-positive advantage (above tau_pos: asymmetric)."""


class ClipCovOptions(_Options):
    """Options of ``clip_cov``."""

    clip_cov_ratio: float = Field(0.0002, gt=0, le=1)
    """Share of response tokens whose gradient is dropped."""
    clip_cov_lb: float = 1.0
    """Lower covariance bound of the tokens eligible for dropping."""
    clip_cov_ub: float = 5.0
    """Upper covariance bound of the tokens eligible for dropping."""

    @model_validator(mode="after")
    def _bounds_ordered(self) -> ClipCovOptions:
        if self.clip_cov_lb >= self.clip_cov_ub:
            raise ValueError(
                f"clip_cov_lb ({self.clip_cov_lb}) must be below clip_cov_ub ({self.clip_cov_ub})"
            )
        return self


class KlCovOptions(_Options):
    """Options of ``kl_cov``."""

    kl_cov_ratio: float = Field(0.0002, gt=0, le=1)
    """Share of response tokens (highest covariance) that get the KL penalty."""
    ppo_kl_coef: float = Field(0.1, ge=0)
    """Coefficient of the |log ratio| penalty on those tokens."""
