"""A tiny chat model for offline tests, saved as a Hugging Face directory.

The tokenizer and chat template are :mod:`rlctl.models.tiny_chat`'s (``model.path =
"tiny-chat"`` builds the same in memory); the model is a random-init one-layer Qwen3 small
enough to generate in milliseconds.
"""

from __future__ import annotations

from pathlib import Path

from rlctl.models.tiny_chat import CHAT_TEMPLATE, MARKUP, SPECIALS, build_chat_tokenizer

__all__ = ["CHAT_TEMPLATE", "MARKUP", "SPECIALS", "build_chat_tokenizer", "write_chat_model"]


def write_chat_model(directory: str | Path, *, seed: int = 0, max_positions: int = 1024) -> Path:
    """Save the tokenizer and a random-init Qwen3 under ``directory`` (an HF model dir)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out = Path(directory)
    tokenizer = build_chat_tokenizer()
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
