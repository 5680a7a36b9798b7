"""The base of every recipe section (:mod:`rlctl.config.recipe`, :mod:`rlctl.config.algorithm`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from rlctl.config.strict import STRICT_CONFIG


class Section(BaseModel):
    """Base of every recipe section: unknown keys are errors, values immutable, numbers
    strict and finite (:mod:`rlctl.config.strict`)."""

    model_config = ConfigDict(**STRICT_CONFIG, populate_by_name=True)


Options = dict[str, Any]
