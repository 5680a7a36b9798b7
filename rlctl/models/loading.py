"""Load the policy tokenizer, causal LM and value model named by ``[model]``.

``path = "tiny"`` builds the offline tiny model (:mod:`rlctl.models.tiny`); a catalog name
(``smollm2-135m``, :mod:`rlctl.models.catalog`) is the directory ``rlctl models install``
wrote; any other path must be a local Hugging Face directory: everything is loaded with
``local_files_only=True``, so a run never downloads weights behind the user's back.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rlctl.models.catalog import resolve_model_path
from rlctl.models.tiny import build_tiny_model, build_tiny_tokenizer

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from rlctl.config.recipe import ModelSection

TINY = "tiny"


def torch_dtype(name: str) -> torch.dtype:
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def _check_local_dir(path: str, what: str) -> None:
    if not Path(path).is_dir():
        raise FileNotFoundError(
            f"[model] {what} = {path!r} is not a local directory; rlctl never downloads "
            f"weights: download the checkpoint first (e.g. `hf download <id> --local-dir DIR`) "
            f"and set {what} to that directory, use a model `rlctl models list` names, or \"tiny\" "
            "for the offline tiny model"
        )


def load_tokenizer(model: ModelSection) -> PreTrainedTokenizerBase:
    """The policy tokenizer, left-padded, with a pad token (falls back to eos)."""
    source = model.tokenizer or model.path
    if source == TINY:
        return build_tiny_tokenizer()
    from transformers import AutoTokenizer

    source = resolve_model_path(source)
    _check_local_dir(source, "tokenizer" if model.tokenizer else "path")
    tok = AutoTokenizer.from_pretrained(
        source, local_files_only=True, trust_remote_code=model.trust_remote_code
    )
    tok.padding_side = "left"  # generation appends on the right
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_causal_lm(
    model: ModelSection, seed: int, *, vocab_size: int | None = None
) -> PreTrainedModel:
    """The policy as a causal LM in ``model.dtype``; identical on every call with one seed.

    ``vocab_size`` only matters for ``tiny`` (defaults to the tiny tokenizer's size).
    """
    dtype = torch_dtype(model.dtype)
    if model.path == TINY:
        extra = {"vocab_size": vocab_size} if vocab_size else {}
        lm = build_tiny_model(model.tiny, seed, **extra)
        return lm.to(dtype)
    from transformers import AutoModelForCausalLM

    path = resolve_model_path(model.path)
    _check_local_dir(path, "path")
    lm = AutoModelForCausalLM.from_pretrained(
        path,
        local_files_only=True,
        dtype=dtype,
        trust_remote_code=model.trust_remote_code,
        attn_implementation="sdpa",
    )
    return lm


def load_value_model(model: ModelSection, seed: int, *, path: str | None = None) -> nn.Module:
    """A value model: the transformer trunk of ``path`` (default ``model.path``) + a value head.

    The trunk is the causal LM without its LM head (``lm.model`` for HF decoder models).
    """
    section = model if path is None else model.model_copy(update={"path": path})
    lm = load_causal_lm(section, seed)
    trunk = lm.get_decoder() if hasattr(lm, "get_decoder") else lm.model
    from rlctl.models.value_model import ValueModel

    return ValueModel(trunk, lm.config.hidden_size, torch_dtype(model.dtype))
