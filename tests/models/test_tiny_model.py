"""The offline tiny model and tokenizer, and loading from a local HF directory."""

from __future__ import annotations

import pytest
import torch

from rlctl.config.recipe import ModelSection
from rlctl.models.loading import load_causal_lm, load_tokenizer, load_value_model
from rlctl.models.tiny import BOS_ID, EOS_ID, PAD_ID, TINY_VOCAB, build_tiny_tokenizer

TINY = ModelSection(path="tiny", dtype="float32")


def test_tokenizer_is_one_token_per_character():
    tok = build_tiny_tokenizer()
    assert len(tok) == len(TINY_VOCAB) == 32
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (PAD_ID, BOS_ID, EOS_ID)
    ids = tok("4821=")["input_ids"]
    assert ids[0] == BOS_ID and len(ids) == 6
    assert tok.decode(ids, skip_special_tokens=True) == "4821="
    batch = tok(["1=", "123="], padding=True)["input_ids"]
    assert batch[0][:2] == [PAD_ID, PAD_ID]  # left padding


def test_tiny_model_is_deterministic_per_seed():
    a, b, c = (load_causal_lm(TINY, seed=s) for s in (0, 0, 1))
    assert sum(p.numel() for p in a.parameters()) == 76_160
    assert a.config.tie_word_embeddings and a.dtype == torch.float32
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)


def test_building_a_model_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    load_causal_lm(TINY, seed=5)
    assert torch.equal(torch.rand(3), expected)


def test_local_hf_directory_round_trip(tmp_path):
    model = load_causal_lm(TINY, seed=2)
    model.save_pretrained(tmp_path)
    build_tiny_tokenizer().save_pretrained(tmp_path)
    section = ModelSection(path=str(tmp_path), dtype="float32")
    loaded = load_causal_lm(section, seed=99)  # the seed does not matter for a checkpoint
    for name, w in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], w), name
    tok = load_tokenizer(section)
    assert tok.padding_side == "left" and tok.pad_token_id == PAD_ID
    assert tok("12=")["input_ids"] == build_tiny_tokenizer()("12=")["input_ids"]


def test_missing_directory_explains_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="never downloads"):
        load_causal_lm(ModelSection(path=str(tmp_path / "nope")), seed=0)


def test_value_model_shapes():
    critic = load_value_model(TINY, seed=0)
    ids = torch.tensor([[1, 5, 6, 14, 7]])
    values = critic(ids, torch.ones_like(ids))
    assert values.shape == (1, 5) and torch.all(values == 0)  # zero-initialised head
