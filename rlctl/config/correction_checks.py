"""The checks of ``[algorithm.correction]``, called by the recipe's section validators: each
names the key, what is wrong and the fix."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

# Which method each knob belongs to; a knob of another method is a mistake.
KNOBS = {"cap": ("truncated_is", "decoupled_ppo"), "low": ("masked_is",),
         "high": ("masked_is",), "level": ("masked_is",)}


def check_correction(section: Any) -> None:
    """``[algorithm.correction]``: knobs of its method only, and values that mean something."""
    model = type(section)
    for key, methods in KNOBS.items():
        # set to something else than its default (a dumped recipe spells every key)
        given = getattr(section, key) != model.model_fields[key].default
        if given and section.method not in methods:
            refuse(model, (key,), getattr(section, key),
                   f"{key} applies to method = {' or '.join(map(repr, methods))}, not "
                   f"{section.method!r}", f'set method = "{methods[0]}", or remove {key}')
    if section.method == "decoupled_ppo" and section.cap is not None and section.cap <= 1:
        refuse(model, ("cap",), section.cap, "decoupled_ppo masks the weights above cap",
               "use a cap > 1 (the default is 5); a large cap masks nothing")
    if section.method == "masked_is" and section.low >= section.high:
        refuse(model, ("low",), section.low, f"masked_is keeps ratios in [low, high], but "
               f"high is {section.high}", "choose low < high (the defaults are 0.5 and 2)")


def refuse(model: type, loc: tuple[str, ...], value: Any, message: str, fix: str) -> None:
    """Raise a validation error at ``loc`` inside ``model`` that says its fix."""
    error = PydanticCustomError("value_error", message.replace("{", "(").replace("}", ")"),
                                {"fix": fix})
    raise ValidationError.from_exception_data(
        model.__name__, [InitErrorDetails(type=error, loc=loc, input=value)])
