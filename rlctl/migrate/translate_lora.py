"""verl's LoRA keys -> ``[model.lora]``.

verl's FSDP workers train LoRA through PEFT from ``actor_rollout_ref.model.lora_rank``,
``lora_alpha``, ``target_modules`` and ``exclude_modules``, and load the adapter into vLLM /
SGLang at each sync: rlctl's ``[model.lora]`` with ``[engines.rollout] lora_sync = "adapter"``
(its default) does the same. ``use_shm`` (loading the model through shared memory) and
``rollout.layered_summon`` (gathering the FSDP shards layer by layer for the sync) change
nothing here. What rlctl cannot reproduce is refused: an adapter to start from
(``lora_adapter_path``), a regular expression for the module names (PEFT reads a string other
than ``all-linear`` as one). verl's Megatron LoRA (``model.lora.*``, Megatron module names) and
LoRA on the critic are refused by :mod:`rlctl.migrate.rules`.
"""

from __future__ import annotations

import re
from typing import Any

from rlctl.migrate.ledger import Ledger

M = "actor_rollout_ref.model"
ALL_LINEAR = "all-linear"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")


def translate_lora(lg: Ledger) -> None:
    """``[model.lora]`` from verl's FSDP LoRA keys; nothing when ``lora_rank`` is 0 (the rules
    then drop the other keys as off)."""
    rank = lg.value(f"{M}.lora_rank") or 0
    if not rank:
        return
    lg.put("model.lora.rank", int(lg.take(f"{M}.lora_rank", "model.lora.rank")),
           "model.lora_rank")
    lg.put("model.lora.alpha", float(lg.take(f"{M}.lora_alpha", "model.lora.alpha")),
           "model.lora_alpha")
    target = _names(lg, f"{M}.target_modules", "model.lora.target_modules", allow_all=True)
    if target is not None:
        lg.put("model.lora.target_modules", target, "model.target_modules")
    exclude = _names(lg, f"{M}.exclude_modules", "model.lora.exclude_modules", allow_all=False)
    if exclude:
        lg.put("model.lora.exclude_modules", exclude, "model.exclude_modules")
    adapter = lg.value(f"{M}.lora_adapter_path")
    if adapter:
        lg.error(f"{M}.lora_adapter_path", f"{adapter!r}: rlctl's adapters start from zero "
                 "(the base model); it cannot load a trained adapter to continue from",
                 "remove lora_adapter_path (or merge that adapter into model.path first)")
    else:
        lg.drop(f"{M}.lora_adapter_path", "unset: the adapters start from zero")


def _names(lg: Ledger, key: str, target: str, *, allow_all: bool) -> Any:
    """``all-linear`` or a list of module names from verl's value (null: none); a regular
    expression is refused."""
    value = lg.value(key)
    if value is None or value == []:
        lg.drop(key, "unset")
        return None
    if allow_all and value == ALL_LINEAR:
        return lg.take(key, target)
    names = [value] if isinstance(value, str) else list(value)
    bad = [n for n in names if not isinstance(n, str) or not _NAME.fullmatch(n)]
    if bad:
        lg.error(key, f"{value!r}: PEFT reads a string as a regular expression, and rlctl takes "
                 "module names only", 'list the module names, e.g. ["q_proj", "v_proj"]' +
                 (', or "all-linear"' if allow_all else ""))
        return None
    lg.take(key, target)
    return names
