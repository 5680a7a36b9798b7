"""Export a policy as a Hugging Face model directory (safetensors).

The result loads with ``AutoModelForCausalLM.from_pretrained(out_dir)`` (and
``AutoTokenizer`` when a tokenizer is given): it is what users take out of a run.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlctl.checkpoint.atomic import fsync_dir
from rlctl.checkpoint.export_target import (
    check_export_target,
    new_partial_dir,
    publish,
    write_marker,
)


class ExportError(ValueError):
    """The state dict does not fit the model config."""


def export_hf(
    model_state_dict: Mapping[str, Any],
    config: Any,
    tokenizer: Any,
    out_dir: Path | str,
    *,
    dtype: Any = None,
    overwrite: bool = False,
    source: str | None = None,
) -> Path:
    """Write ``config.json``, ``model*.safetensors`` (+ tokenizer files) into ``out_dir``.

    ``model_state_dict`` is a full (gathered, CPU) state dict of the causal LM whose
    architecture ``config`` (a ``transformers.PretrainedConfig``) describes. Tied
    embeddings may appear under one name or both. ``dtype`` (a ``torch.dtype``) casts the
    floating-point tensors; ``None`` keeps them. ``tokenizer`` may be ``None``.

    ``out_dir`` must be absent, empty or an earlier export (see
    :mod:`rlctl.checkpoint.export_target`); ``overwrite=True`` also replaces another
    directory. ``source`` (e.g. the checkpoint path) is recorded in the export's marker.
    The directory appears atomically: files are written to a fresh hidden sibling that is
    renamed at the end.
    """
    import torch
    from transformers import AutoModelForCausalLM

    out_dir = Path(out_dir)
    check_export_target(out_dir, overwrite=overwrite)  # before any work: refuse early
    state = {k: _plain_tensor(k, v) for k, v in model_state_dict.items()}
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
        config = copy.deepcopy(config)  # the caller's config keeps its dtype
        config.dtype = dtype

    # Build the module skeleton on the meta device (no memory), then adopt the given
    # tensors as its parameters: load_state_dict checks every name and shape for us.
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    tied = _tied_names(model, config)
    missing = [k for k in missing if k not in tied]
    if missing or unexpected:
        raise ExportError(
            f"the state dict does not match {type(model).__name__} built from the config: "
            f"missing {_few(missing)}, unexpected {_few(unexpected)}; pass the full state dict of "
            "the same architecture (gathered on one rank, without wrapper prefixes)"
        )
    if tied:
        model.tie_weights()
    leftover = [n for n, p in model.named_parameters() if p.is_meta]
    if leftover:
        raise ExportError(f"parameters {_few(leftover)} got no value from the state dict")

    partial = new_partial_dir(out_dir)
    try:
        _save(model, tokenizer, partial)
        write_marker(partial, source=source)
        publish(partial, out_dir, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)  # only the work directory this call made
        raise
    fsync_dir(out_dir.parent)
    return out_dir


def _save(model: Any, tokenizer: Any, directory: Path) -> None:
    from transformers.utils import logging as hf_logging

    # transformers draws a tqdm bar per save; it would break the trainer's progress display.
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(directory)
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)


def _plain_tensor(name: str, value: Any) -> Any:
    import torch

    if not isinstance(value, torch.Tensor):
        raise ExportError(f"state dict entry {name!r} is a {type(value).__name__}, not a tensor")
    if type(value) is not torch.Tensor and hasattr(value, "full_tensor"):
        raise ExportError(
            f"state dict entry {name!r} is a sharded DTensor: gather a full state dict first "
            "(get_model_state_dict(..., StateDictOptions(full_state_dict=True, cpu_offload=True)))"
        )
    return value.detach().cpu().contiguous()


def _tied_names(model: Any, config: Any) -> set[str]:
    """Parameter names that are aliases of another parameter under tied embeddings."""
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    if not getattr(text_config, "tie_word_embeddings", False):
        return set()
    tied = getattr(model, "_tied_weights_keys", None) or {}
    return set(tied) if not isinstance(tied, dict) else set(tied) | set(tied.values())


def _few(names: list[str], n: int = 5) -> str:
    if not names:
        return "none"
    shown = ", ".join(sorted(names)[:n])
    return f"[{shown}{', ...' if len(names) > n else ''}] ({len(names)})"
