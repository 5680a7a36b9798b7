"""``[model.lora]``: train LoRA adapters instead of every weight.

With ``rank > 0`` the policy's weights stay frozen and low-rank adapters (``peft``) are trained
on the modules ``target_modules`` names: only they get gradients and optimizer state, the KL
reference is the same module with its adapters disabled (no second copy of the weights), and
the weight sync moves the adapters (or the merged weights: ``[engines.rollout] lora_sync``).
``rank = 0`` (the default) trains every weight. Names follow verl's ``lora_rank`` /
``lora_alpha`` / ``target_modules`` / ``exclude_modules`` and PEFT's ``LoraConfig``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, PositiveFloat, model_validator

from rlctl.config.correction_checks import refuse
from rlctl.config.section import Section

ALL_LINEAR = "all-linear"
"""``target_modules`` value: every linear layer except the output head (PEFT's meaning)."""

# A module name as PEFT matches it: the last components of a module's path (``q_proj``,
# ``mlp.down_proj``). No wildcards: a name either matches a path suffix or nothing.
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")
_NAME_LISTS = ("target_modules", "exclude_modules", "trainable_modules")

# Keys that only mean something with adapters (rank > 0).
_LORA_KNOBS = ("alpha", "dropout", "target_modules", "exclude_modules", "trainable_modules")


class LoRASection(Section):
    """LoRA adapters (``peft``) trained instead of the policy's weights; ``rank = 0`` is off."""

    rank: int = Field(0, ge=0, le=1024)
    """Rank r of the adapters (their inner dimension); 0 (the default) trains every weight."""
    alpha: PositiveFloat = 16.0
    """LoRA alpha: the adapters' update is scaled by alpha / rank."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the adapters' input while training (0: none)."""
    target_modules: Literal["all-linear"] | list[str] = ALL_LINEAR
    """Modules that get adapters: ``"all-linear"`` (every linear layer but the output head) or
    a list of names, each matching the modules whose path ends with it (``["q_proj",
    "v_proj"]``)."""
    exclude_modules: list[str] = []
    """Names of modules left without adapters, matched like ``target_modules``."""
    trainable_modules: list[str] = []
    """Names of modules trained in full next to the adapters (PEFT's ``modules_to_save``, e.g.
    ``["lm_head"]``); their weights reach the rollout engine with ``lora_sync = "merged"``."""

    @property
    def enabled(self) -> bool:
        """Whether adapters are trained (``rank > 0``)."""
        return self.rank > 0

    @model_validator(mode="before")
    @classmethod
    def _module_names(cls, data: Any) -> Any:
        """Module names are names (one error each, saying the fix); a bare string other than
        ``all-linear`` is a list written without brackets."""
        if not isinstance(data, dict):
            return data
        target = data.get("target_modules", ALL_LINEAR)
        if target != ALL_LINEAR and not isinstance(target, list):
            example = target if isinstance(target, str) else "q_proj"
            refuse(cls, ("target_modules",), target,
                   f"target_modules is {ALL_LINEAR!r} or a list of module names",
                   f'write target_modules = ["{example}"] (a list), or "{ALL_LINEAR}"')
        for key in _NAME_LISTS:
            names = data.get(key)
            for i, name in enumerate(names if isinstance(names, list) else ()):
                if not isinstance(name, str) or not _MODULE_NAME.fullmatch(name):
                    refuse(cls, (key, i), name, "not a module name",
                           "write the end of a module's path, e.g. \"q_proj\" or "
                           "\"mlp.down_proj\" (letters, digits, '_' and '.'; no wildcards)")
        return data

    @model_validator(mode="after")
    def _knobs_need_a_rank(self) -> LoRASection:
        if self.enabled:
            return self
        fields = type(self).model_fields
        for key in _LORA_KNOBS:
            value = getattr(self, key)
            if value != fields[key].default:  # a dumped recipe spells every key, defaults too
                refuse(type(self), (key,), value,
                       f"{key} configures LoRA adapters, but rank = 0 (LoRA off: every weight "
                       "is trained)", f"set [model.lora] rank > 0 (e.g. 8), or remove {key}")
        return self
