"""Load the policy tokenizer, causal LM and value model named by ``[model]``.

``path = "tiny"`` builds the offline tiny model (:mod:`rlctl.models.tiny`), ``"tiny-chat"``
the same model over a chat tokenizer with a chat template (:mod:`rlctl.models.tiny_chat`);
a catalog name (``smollm2-135m``, :mod:`rlctl.models.catalog`) is the directory
``rlctl models install`` wrote; any other path must be a local Hugging Face directory:
everything is loaded with
``local_files_only=True``, so a run never downloads weights behind the user's back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from rlctl.models.catalog import resolve_model_path
from rlctl.models.tiny import build_tiny_model, build_tiny_tokenizer
from rlctl.models.tiny_chat import TINY_CHAT, build_chat_tokenizer

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from rlctl.config.recipe import ModelSection

TINY = "tiny"
BUILT_IN_MODELS = (TINY, TINY_CHAT)
"""``model.path`` values built offline instead of loaded from a directory."""


def torch_dtype(name: str) -> torch.dtype:
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


class ModelDirError(ValueError):
    """A model directory rlctl will not load: it holds something that is not a file where
    transformers reads one, or it needs its own Python code and that is not allowed."""


# what transformers reads from a model directory: a custom-code model names its classes here
_CODE_CONFIGS = ("config.json", "tokenizer_config.json")


def _check_local_dir(path: str, what: str, *, trust_remote_code: bool = False) -> None:
    """``path`` is a local directory transformers can read without hanging and, unless
    ``trust_remote_code``, without running code from it."""
    if not Path(path).is_dir():
        raise FileNotFoundError(
            f"[model] {what} = {path!r} is not a local directory; rlctl never downloads "
            f"weights: download the checkpoint first (e.g. `hf download <id> --local-dir DIR`) "
            f"and set {what} to that directory, use a model `rlctl models list` names, or \"tiny\" "
            "for the offline tiny model"
        )
    from rlctl.regular_file import not_regular, read_text

    for entry in sorted(Path(path).iterdir()):
        odd = None if entry.is_dir() else not_regular(entry)  # a FIFO would hang the read
        if odd is not None:
            raise ModelDirError(f"[model] {what}: {odd}, not a file; remove it")
    if trust_remote_code:
        return
    for name in _CODE_CONFIGS:
        config = Path(path) / name
        try:
            auto_map = json.loads(read_text(config)).get("auto_map") if config.exists() else None
        except (OSError, ValueError, AttributeError):
            continue  # not JSON (or not an object): transformers reports that itself
        if auto_map:
            raise ModelDirError(
                f"[model] {what} = {path!r} needs its own Python code ({name} maps "
                f"{', '.join(sorted(auto_map))} to it), and rlctl runs no model code unless "
                "model.trust_remote_code = true (only for a model you trust)")


def model_dir_problems(model: ModelSection) -> list[tuple[str, str]]:
    """``(key, why)`` for each directory of ``[model]`` that :func:`load_tokenizer` or
    :func:`load_causal_lm` would refuse, found without loading (``rlctl train`` asks before
    anything starts)."""
    out: list[tuple[str, str]] = []
    for what in ("path", "tokenizer"):
        value = getattr(model, what)
        if value is None or value in BUILT_IN_MODELS:
            continue
        try:  # a catalog model not installed is the preflight's own problem (catalog_problems)
            _check_local_dir(resolve_model_path(value), what,
                             trust_remote_code=model.trust_remote_code)
        except (FileNotFoundError, ModelDirError) as exc:
            out.append((f"model.{what}", str(exc).removeprefix("[model] ")))
    return out


def load_tokenizer(model: ModelSection) -> PreTrainedTokenizerBase:
    """The policy tokenizer, left-padded, with a pad token (falls back to eos)."""
    source = model.tokenizer or model.path
    if source == TINY:
        return build_tiny_tokenizer()
    if source == TINY_CHAT:
        return build_chat_tokenizer()
    from transformers import AutoTokenizer

    source = resolve_model_path(source)
    _check_local_dir(source, "tokenizer" if model.tokenizer else "path",
                     trust_remote_code=model.trust_remote_code)
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

    ``vocab_size`` only matters for the built-in models (defaults to their tokenizer's size).
    """
    dtype = torch_dtype(model.dtype)
    if model.path in BUILT_IN_MODELS:
        if model.path == TINY_CHAT and not vocab_size:
            vocab_size = len(build_chat_tokenizer())
        extra = {"vocab_size": vocab_size} if vocab_size else {}
        lm = build_tiny_model(model.tiny, seed, **extra)
        return lm.to(dtype)
    from transformers import AutoModelForCausalLM

    path = resolve_model_path(model.path)
    _check_local_dir(path, "path", trust_remote_code=model.trust_remote_code)
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
