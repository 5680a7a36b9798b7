"""A GGUF file -> a Hugging Face checkpoint directory (safetensors, tokenizer, chat template).

transformers reads GGUF itself (with the ``gguf`` package, and ``accelerate`` for the load):
``from_pretrained(dir, gguf_file=name)`` de-quantizes every tensor to the requested dtype and
rebuilds the tokenizer, chat template included. What it refuses is ``save_pretrained`` of
that model ("quantized with gguf and is not serializable"), so the conversion moves the
de-quantized ``state_dict`` into a fresh model of the same class built from the config
without its ``quantization_config``, and saves that. The result is an ordinary checkpoint
every engine loads (``hf``, vLLM and SGLang servers, FSDP, Megatron), and its logits equal
transformers' own GGUF load exactly (:func:`max_logit_difference`; the install checks it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

REAL_EXTRA = 'pip install "rlctl[real]"'
# A few chat prompts: the equality check of a conversion runs on them.
CHECK_PROMPTS: tuple[str, ...] = (
    "What is 17 + 25? Answer with the number only.",
    "Tom has 3 apples and buys 5 more. How many apples does he have?",
    "Name a colour.",
)


class GGUFConversionError(RuntimeError):
    """The GGUF file could not be read or converted (the message says what to do)."""


def _require_gguf_support() -> None:
    import importlib.util

    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise GGUFConversionError(
            f"reading GGUF needs the {' and '.join(missing)} package"
            f"{'s' if len(missing) > 1 else ''}: {REAL_EXTRA}")


def load_gguf(gguf_path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """transformers' own load of ``gguf_path``: the de-quantized fp32 model and its tokenizer."""
    _require_gguf_support()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, dtype=torch.float32, local_files_only=True)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise GGUFConversionError(f"transformers cannot load {gguf_path}: {exc}") from exc
    return model.eval(), tokenizer


def convert_gguf(gguf_path: Path, out_dir: Path) -> Path:
    """Write ``gguf_path`` as an fp32 HF checkpoint into ``out_dir`` (which must not exist)."""
    gguf_model, tokenizer = load_gguf(gguf_path)
    config = gguf_model.config
    # The copy loads like any checkpoint: no GGUF marker left for from_pretrained to act on.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = type(gguf_model)(config)  # random init, overwritten below
    missing, unexpected = plain.load_state_dict(gguf_model.state_dict(), strict=False)
    tied = set(getattr(plain, "_tied_weights_keys", None) or ())
    if unexpected or set(missing) - tied:
        raise GGUFConversionError(
            f"{gguf_path}: the de-quantized weights do not fit {type(plain).__name__} "
            f"(missing {sorted(set(missing) - tied)[:5]}, unexpected {sorted(unexpected)[:5]})")
    plain.tie_weights()
    plain.generation_config = gguf_model.generation_config
    out_dir.mkdir(parents=True)
    plain.save_pretrained(out_dir)  # safetensors; tied embeddings stored once
    tokenizer.save_pretrained(out_dir)  # tokenizer.json, its config, chat_template.jinja
    return out_dir


def chat_prompt_ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """``text`` as one user turn in the tokenizer's chat template, ready for the answer."""
    ids = tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                        add_generation_prompt=True, tokenize=True,
                                        return_dict=False)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # some versions return a BatchEncoding
        ids = ids["input_ids"]
    return [int(t) for t in ids]


def max_logit_difference(
    gguf_path: Path, hf_dir: Path, prompts: Sequence[str] = CHECK_PROMPTS,
    *, reference: tuple[Any, Any] | None = None,
) -> float:
    """The largest absolute difference between the logits of transformers' GGUF load and of
    the converted checkpoint, over every position of ``prompts`` (chat-formatted by the
    converted tokenizer, which must give the GGUF tokenizer's ids too).

    ``reference``: the GGUF ``(model, tokenizer)`` already loaded (saves a second load).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_model, gguf_tok = reference or load_gguf(gguf_path)
    hf_tok = AutoTokenizer.from_pretrained(hf_dir, local_files_only=True)
    hf_model = AutoModelForCausalLM.from_pretrained(hf_dir, local_files_only=True,
                                                    dtype=torch.float32).eval()
    worst = 0.0
    with torch.no_grad():
        for text in prompts:
            ids = chat_prompt_ids(hf_tok, text)
            if ids != chat_prompt_ids(gguf_tok, text):
                raise GGUFConversionError(
                    f"the converted tokenizer in {hf_dir} encodes {text!r} differently from "
                    "the GGUF one")
            batch = torch.tensor([ids])  # [1, L]
            diff = (hf_model(batch).logits - gguf_model(batch).logits).abs().max()  # [1, L, V]
            worst = max(worst, float(diff))
    return worst
