"""A tiny chat model for offline tests: a character tokenizer with a ChatML chat template.

The template follows the layout of Qwen's (``<|im_start|>role\\n...<|im_end|>\\n``, tool
schemas in a system block, ``<tool_call>`` blocks in assistant turns, tool results as
``<tool_response>`` blocks in a user turn), so the chat-template code paths of the agent
loops and the gateway run on a CPU without downloading anything. The model is a random-init
Qwen3 small enough to generate in milliseconds. (HF renders templates with ``trim_blocks``:
a newline right after a block tag is written ``{{ '\\n' }}``.)
"""

from __future__ import annotations

import string
from pathlib import Path

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
MARKUP = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")

CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n# Tools"
    "{% for tool in tools %}{{ '\\n' }}{{ tool | tojson }}{% endfor %}<|im_end|>\n{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'assistant' %}<|im_start|>assistant\n{{ message.content or '' }}"
    "{% for tc in message.tool_calls or [] %}<tool_call>\n"
    '{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}'
    "\n</tool_call>{% endfor %}<|im_end|>\n"
    "{% elif message.role == 'tool' %}"
    "{% if loop.first or messages[loop.index0 - 1].role != 'tool' %}<|im_start|>user{% endif %}"
    "{{ '\\n' }}<tool_response>\n{{ message.content }}\n</tool_response>"
    "{% if loop.last or messages[loop.index0 + 1].role != 'tool' %}<|im_end|>\n{% endif %}"
    "{% else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_chat_tokenizer():  # type: ignore[no-untyped-def]
    """Printable ASCII and newline, one token per character, ChatML specials and markup."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [c for c in string.printable if c not in "\t\r\x0b\x0c"]
    vocab = {tok: i for i, tok in enumerate([*SPECIALS, *MARKUP, "<unk>", *chars])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(""), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        unk_token="<unk>",
        padding_side="left",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.add_tokens(list(MARKUP))  # whole tokens, kept by decode(skip_special_tokens=True)
    fast.chat_template = CHAT_TEMPLATE
    return fast


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
