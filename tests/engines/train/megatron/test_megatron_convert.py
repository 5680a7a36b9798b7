"""HF <-> Megatron weight mapping (pure tensor code: runs without megatron-core)."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2Config, Qwen3Config, Qwen3ForCausalLM

from rlctl.engines.train.megatron.convert import (
    DenseShape,
    hf_key_order,
    hf_to_shard,
    is_tp_sharded,
    shards_to_hf,
)


def _megatron_names(shape: DenseShape) -> list[str]:
    names = ["embedding.word_embeddings.weight", "decoder.final_layernorm.weight"]
    if not shape.tied:
        names.append("output_layer.weight")
    for layer in range(shape.layers):
        p = f"decoder.layers.{layer}."
        names += [p + n for n in (
            "input_layernorm.weight", "self_attention.linear_qkv.weight",
            "self_attention.linear_proj.weight", "pre_mlp_layernorm.weight",
            "mlp.linear_fc1.weight", "mlp.linear_fc2.weight")]
        if shape.qk_norm:
            names += [p + "self_attention.q_layernorm.weight",
                      p + "self_attention.k_layernorm.weight"]
        if shape.qkv_bias:
            names.append(p + "self_attention.linear_qkv.bias")
    return names


def _round_trip(hf: dict[str, torch.Tensor], shape: DenseShape) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name in _megatron_names(shape):
        shards = [hf_to_shard(name, hf, shape, r) for r in range(shape.tp)]
        if not is_tp_sharded(name):
            assert all(torch.equal(s, shards[0]) for s in shards)  # replicated
        out.update(shards_to_hf(name, shards, shape))
    if shape.tied:
        out["lm_head.weight"] = out["model.embed_tokens.weight"]
    return {k: out[k] for k in hf_key_order(shape)}


def _qwen3(**kw) -> Qwen3ForCausalLM:
    config = Qwen3Config(vocab_size=32, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, tie_word_embeddings=True, **kw)
    torch.manual_seed(0)
    return Qwen3ForCausalLM(config)


@pytest.mark.parametrize("tp", [1, 2])
def test_qwen3_round_trip_is_exact(tp):
    model = _qwen3()
    hf = model.state_dict()
    shape = DenseShape.from_hf(model.config, tp)
    back = _round_trip(hf, shape)
    assert list(back) == list(hf)  # HF names, HF order
    for name, tensor in hf.items():
        assert torch.equal(back[name], tensor), name


def test_qwen2_with_bias_untied_and_padded_vocab():
    from transformers import Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=33, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                         tie_word_embeddings=False)
    torch.manual_seed(1)
    hf = Qwen2ForCausalLM(config).state_dict()
    shape = DenseShape.from_hf(config, tp=2)
    assert shape.qkv_bias and not shape.tied and shape.padded_vocab == 34
    emb = hf_to_shard("embedding.word_embeddings.weight", hf, shape, 1)
    assert emb.shape == (17, 32) and torch.all(emb[-1] == 0)  # the padding row
    back = _round_trip(hf, shape)
    assert set(back) == set(hf)
    for name, tensor in hf.items():
        assert torch.equal(back[name], tensor), name


def test_shard_layouts_follow_megatron():
    """qkv: per KV group [q heads; k; v], whole groups per TP rank; fc1: [gate_r; up_r]."""
    model = _qwen3()
    hf = model.state_dict()
    shape = DenseShape.from_hf(model.config, tp=2)
    p = "model.layers.0."
    q, k, v = (hf[p + f"self_attn.{x}_proj.weight"] for x in "qkv")
    qkv1 = hf_to_shard("decoder.layers.0.self_attention.linear_qkv.weight", hf, shape, 1)
    # group 1 of 2: query heads 2, 3 (rows 32..63), then key head 1, then value head 1
    torch.testing.assert_close(qkv1, torch.cat([q[32:64], k[16:32], v[16:32]]), rtol=0, atol=0)
    fc1 = hf_to_shard("decoder.layers.0.mlp.linear_fc1.weight", hf, shape, 0)
    gate, up = hf[p + "mlp.gate_proj.weight"], hf[p + "mlp.up_proj.weight"]
    torch.testing.assert_close(fc1, torch.cat([gate[:64], up[:64]]), rtol=0, atol=0)
    proj = hf_to_shard("decoder.layers.0.self_attention.linear_proj.weight", hf, shape, 1)
    torch.testing.assert_close(proj, hf[p + "self_attn.o_proj.weight"][:, 32:], rtol=0, atol=0)
    # Transformer-Engine spec names map onto the same HF tensors.
    te = hf_to_shard("decoder.layers.0.self_attention.linear_qkv.layer_norm_weight", hf,
                     shape, 0)
    assert torch.equal(te, hf[p + "input_layernorm.weight"])


def test_bad_layouts_are_explained():
    with pytest.raises(ValueError, match="must divide num_key_value_heads=2"):
        DenseShape.from_hf(_qwen3().config, tp=4)
    config = Qwen3Config()
    config.model_type = "gemma"
    with pytest.raises(ValueError, match="use the fsdp engine"):
        DenseShape.from_hf(config)
