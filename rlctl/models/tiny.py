"""The offline tiny model: a character-level tokenizer and a random-init Qwen3.

Nothing here downloads anything. The tokenizer is a ``tokenizers`` WordLevel model over a
fixed 32-entry vocabulary, one token per character, so a synthetic digit task's prompt
``"4821="`` is exactly ``[<bos>, 4, 8, 2, 1, =]``. Ids of the special tokens are fixed
(pad=0, bos=1, eos=2, unk=3) so that tests and rewards can rely on them.

The model follows ``../shared/notes/tiny-task.md``: a 2-layer Qwen3 with tied embeddings,
about 76k parameters, that learns ``count_digits`` by GRPO on a CPU in about a minute.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen3ForCausalLM,
        Qwen3ForSequenceClassification,
    )

    from rlctl.config.recipe import TinyModelSection

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3

# Specials first (their ids are fixed above), then digits, then the symbols and letters
# that synthetic tasks and simple arithmetic prompts use. 32 entries in all.
TINY_VOCAB: tuple[str, ...] = (
    PAD, BOS, EOS, UNK,
    *"0123456789",
    *"=+-*/(),.#:? ",
    *"abcxy",
)


def build_tiny_tokenizer() -> PreTrainedTokenizerFast:
    """Build the character tokenizer offline (left padding, ``<bos>`` prepended)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(TINY_VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # One token per character: split on the empty pattern, keep every piece.
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(""), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, BOS_ID)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        padding_side="left",
    )
    assert fast.pad_token_id == PAD_ID and fast.eos_token_id == EOS_ID, "tiny vocab ids moved"
    return fast


def _tiny_config(tiny: TinyModelSection, vocab_size: int, **head: Any) -> Any:
    """The ``Qwen3Config`` of the tiny shape; ``head``: what the model class adds (tied
    embeddings for the policy, one label for a reward model)."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=tiny.hidden_size,
        intermediate_size=tiny.intermediate_size,
        num_hidden_layers=tiny.num_hidden_layers,
        num_attention_heads=tiny.num_attention_heads,
        num_key_value_heads=tiny.num_key_value_heads,
        head_dim=tiny.head_dim,
        max_position_embeddings=tiny.max_position_embeddings,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        attention_dropout=0.0,
        **head,
    )


def build_tiny_model(
    tiny: TinyModelSection, seed: int, vocab_size: int = len(TINY_VOCAB)
) -> Qwen3ForCausalLM:
    """A random-init fp32 Qwen3 of the given shape; identical for identical ``seed``.

    The global RNG is forked so that building a model never shifts the caller's random
    stream (the actor, the reference and the rollout engine each build one).
    """
    import torch
    from transformers import Qwen3ForCausalLM

    config = _tiny_config(tiny, vocab_size, tie_word_embeddings=True)
    config._attn_implementation = "sdpa"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config.pad_token_id = PAD_ID
    model.generation_config.eos_token_id = EOS_ID
    model.generation_config.bos_token_id = BOS_ID
    return model.float()


def build_tiny_reward_model(
    tiny: TinyModelSection, seed: int, vocab_size: int = len(TINY_VOCAB)
) -> Qwen3ForSequenceClassification:
    """A random-init fp32 ``Qwen3ForSequenceClassification`` (one logit) over the tiny vocab.

    What the reward-model tests and examples score with: ``save_pretrained(dir)`` gives a
    checkpoint ``[[rewards]] name = "reward_model"`` loads like any HF reward model, offline.
    """
    import torch
    from transformers import Qwen3ForSequenceClassification

    config = _tiny_config(tiny, vocab_size, num_labels=1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForSequenceClassification(config)
    return model.float()
