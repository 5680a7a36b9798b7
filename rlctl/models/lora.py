"""LoRA adapters on the policy through ``peft``: added, switched off, merged, saved.

:func:`add_adapters` injects PEFT's LoRA layers into a causal LM *in place* (the module keeps
its class and its forward; each targeted ``Linear`` becomes a LoRA layer holding the frozen
``base_layer`` and the trained ``lora_A`` / ``lora_B``) and returns the ``PeftModel`` around
it, which switches the adapters off (:meth:`peft.PeftModel.disable_adapter`: the base model,
the KL reference for free) and names the adapters as PEFT saves them.

Names: the module's own state dict calls a LoRA layer's tensors ``<path>.base_layer.weight``,
``<path>.lora_A.default.weight`` and ``<path>.lora_B.default.weight``; PEFT's saved format
(``adapter_model.safetensors``, what vLLM and SGLang load) calls the adapters
``base_model.model.<path>.lora_A.weight``. :func:`adapter_state` turns the first into the
second (through PEFT), :func:`merged_state` turns the first into the plain HF names of a
model with the adapters merged in (``W + alpha / r * B @ A``), which every engine loads.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from peft import LoraConfig, PeftModel
    from torch import nn

    from rlctl.config.lora import LoRASection

ADAPTER = "default"
"""The adapter's name inside PEFT (its default: one adapter per model)."""
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."
"""What a ``PeftModel`` adds before the wrapped model's parameter names."""


@dataclass(frozen=True)
class AdapterWeights:
    """The LoRA adapters of one policy version: what an adapter-only weight sync moves.

    ``tensors``: CPU tensors under PEFT's saved names; ``config``: PEFT's
    ``adapter_config.json`` (rank, alpha, target modules...). :meth:`save` writes both in
    PEFT's format, which ``PeftModel.from_pretrained``, vLLM and SGLang load.
    """

    tensors: dict[str, torch.Tensor]
    config: dict[str, Any]

    @property
    def nbytes(self) -> int:
        """Bytes of the tensors (what moves; a tied module's copy once)."""
        return sum(t.numel() * t.element_size() for t in _unaliased(self.tensors).values())

    def save(self, directory: Path | str) -> Path:
        """Write ``adapter_config.json`` and ``adapter_model.safetensors`` into ``directory``
        (made if missing)."""
        from safetensors.torch import save_file

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        # a tied module's copy under each of its names, as PEFT saves (and loads) it:
        # safetensors keeps no aliases, so the later names get copies
        first = _unaliased(self.tensors)
        tensors = {k: v.contiguous() if k in first else v.clone()
                   for k, v in self.tensors.items()}
        save_file(tensors, str(out / ADAPTER_WEIGHTS))
        (out / ADAPTER_CONFIG).write_text(json.dumps(self.config, indent=2, sort_keys=True))
        return out


def _unaliased(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``tensors`` with each storage under its first name only (a tied module's trained
    copy is under each of its names)."""
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name in tensors:
        storage = tensors[name].untyped_storage().data_ptr()
        if storage not in seen:
            seen.add(storage)
            out[name] = tensors[name]
    return out


def lora_config(section: LoRASection) -> LoraConfig:
    """PEFT's ``LoraConfig`` of ``[model.lora]``."""
    from peft import LoraConfig

    return LoraConfig(
        r=section.rank,
        lora_alpha=section.alpha,
        lora_dropout=section.dropout,
        target_modules=section.target_modules,
        exclude_modules=list(section.exclude_modules) or None,
        modules_to_save=list(section.trainable_modules) or None,
        # a trained head of a model with tied embeddings trains the embeddings too (one
        # tensor): a tied HF model cannot hold two, and the merged export is such a model
        ensure_weight_tying=bool(section.trainable_modules),
        bias="none",
    )


def add_adapters(model: nn.Module, config: LoraConfig | LoRASection, *, seed: int) -> PeftModel:
    """Inject LoRA layers into ``model`` in place; the returned ``PeftModel`` wraps it.

    Only the adapters (and ``modules_to_save``) require grad. ``lora_A`` is drawn from
    ``seed`` (every rank and every run the same), ``lora_B`` is zero: the adapted model starts
    as the base model. The adapters take the base weights' dtype (PEFT would keep bf16
    models' adapters in fp32; FSDP2 shards one dtype per unit).
    """
    import torch
    from peft import LoraConfig, get_peft_model

    if not isinstance(config, LoraConfig):
        config = lora_config(config)
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        # PEFT reads transformers' old is_gradient_checkpointing name, which warns
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing",
                                category=FutureWarning)
        # (said when a model has no tied head; it is a no-op then)
        warnings.filterwarnings("ignore", message=".*ensure_weight_tying.*no tied modules")
        torch.manual_seed(seed)
        return get_peft_model(model, config, autocast_adapter_dtype=False)


def adapters_from_config(model: nn.Module, config: Mapping[str, Any]) -> PeftModel:
    """:func:`add_adapters` from an ``adapter_config.json`` (what a sync carries)."""
    from peft import PeftConfig

    return add_adapters(model, PeftConfig.from_peft_type(**dict(config)), seed=0)


@contextmanager
def adapters_off(peft_model: PeftModel) -> Iterator[None]:
    """The base model: every LoRA layer skips its adapter inside (no weights move)."""
    with peft_model.disable_adapter():
        yield


def config_dict(peft_model: PeftModel) -> dict[str, Any]:
    """The adapter's ``adapter_config.json`` as PEFT writes it."""
    config = peft_model.peft_config[ADAPTER].to_dict()
    for key, value in config.items():  # sets (target_modules) are lists in JSON
        if isinstance(value, set):
            config[key] = sorted(value)
    config["inference_mode"] = True
    return config


def adapter_state(peft_model: PeftModel,
                  state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The trained tensors of ``state`` (the wrapped model's own names, at least its adapters)
    under PEFT's saved names."""
    from peft import get_peft_model_state_dict

    full = dict(state)
    # PEFT reads a tied module's trained copy under each of its names; a gather of the
    # parameters has each once
    names: dict[int, list[str]] = {}
    for name, p in peft_model.get_base_model().named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    for aliases in names.values():
        known = next((n for n in aliases if n in full), None)
        for alias in aliases if known is not None else ():
            full.setdefault(alias, full[known])
    named = {PEFT_PREFIX + k: v for k, v in full.items()}
    return get_peft_model_state_dict(peft_model, state_dict=named, adapter_name=ADAPTER,
                                     save_embedding_layers=False)


def load_adapter_state(peft_model: PeftModel, tensors: Mapping[str, torch.Tensor]) -> None:
    """Set the adapters from PEFT's saved names; every adapter tensor must be given."""
    from peft import set_peft_model_state_dict

    result = set_peft_model_state_dict(peft_model, dict(tensors), adapter_name=ADAPTER)
    missing = [k for k in result.missing_keys if "lora_" in k]
    if missing or result.unexpected_keys:
        raise ValueError(f"the adapter does not fit the model: missing {missing[:3]}, "
                         f"unexpected {list(result.unexpected_keys)[:3]}")


def merged_state(state: Mapping[str, torch.Tensor], scale: float) -> dict[str, torch.Tensor]:
    """``state`` (the adapted model's own names, full tensors on the CPU) as the plain model's
    state dict: each LoRA layer's ``base_layer.weight + scale * lora_B @ lora_A`` (in fp32,
    cast back) under its plain name, each ``modules_to_save`` copy under the original's name.
    ``scale``: alpha / rank."""

    out: dict[str, torch.Tensor] = {}
    for name, value in state.items():
        if ".lora_A." in name or ".lora_B." in name or ".original_module." in name:
            continue
        if ".base_layer." in name:
            module, leaf = name.split(".base_layer.")
            if leaf == "weight":
                a = state[f"{module}.lora_A.{ADAPTER}.weight"].float()  # [r, in]
                b = state[f"{module}.lora_B.{ADAPTER}.weight"].float()  # [out, r]
                value = (value.float() + scale * (b @ a)).to(value.dtype)  # [out, in]
            out[f"{module}.{leaf}"] = value
        elif f".modules_to_save.{ADAPTER}." in name:
            out[name.replace(f".modules_to_save.{ADAPTER}.", ".")] = value
        else:
            out[name] = value
    return out
