"""The offline tiny chat model's tokenizer: characters, ChatML specials, a chat template.

``model.path = "tiny-chat"`` builds it with the tiny Qwen3 of ``[model.tiny]`` (random init,
this tokenizer's vocabulary): a model with a chat template that runs on a CPU without
downloading anything, for the chat-template code paths (the ``openai_agent`` gateway, hermes
tool calls). The template follows the layout of Qwen's (``<|im_start|>role\\n...<|im_end|>\\n``,
tool schemas in a system block, ``<tool_call>`` blocks in assistant turns, tool results as
``<tool_response>`` blocks in a user turn). (HF renders templates with ``trim_blocks``: a
newline right after a block tag is written ``{{ '\\n' }}``.) The ids of ``<|endoftext|>``
(pad), ``<|im_start|>`` and ``<|im_end|>`` (eos) are 0, 1 and 2, as the tiny model's pad, bos
and eos.
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

TINY_CHAT = "tiny-chat"

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
MARKUP = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
CHAT_VOCAB: tuple[str, ...] = (
    *SPECIALS, *MARKUP, "<unk>", *(c for c in string.printable if c not in "\t\r\x0b\x0c"))
"""The chat tokenizer's vocabulary, in id order: printable ASCII and newline, one token per
character, after the ChatML specials and markup."""

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


def build_chat_tokenizer() -> PreTrainedTokenizerFast:
    """Printable ASCII and newline, one token per character, ChatML specials and markup."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(CHAT_VOCAB)}
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
