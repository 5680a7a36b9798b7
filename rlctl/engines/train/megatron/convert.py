"""Hugging Face Qwen3 (Qwen2 / Llama-style dense) <-> Megatron-core weights, per TP shard.

Pure tensor code (no process groups, no megatron import), so the mapping is unit-testable.
Megatron names are those of a GPTModel built with the *local* layer spec, with the GLOBAL
layer index (``decoder.layers.{layer}.``); the Transformer-Engine spec's fused-norm names
(``linear_qkv.layer_norm_weight``, ``linear_fc1.layer_norm_weight``) are accepted as aliases.

Layouts (TP = tensor-parallel size, r = TP rank, G = KV heads, Q = query heads, d = head dim):

* ``linear_qkv.weight`` [(Q + 2G) d / TP, H]: per KV group g, its Q/G query heads, then its
  key, then its value ([q_g; k_g; v_g]); rank r holds groups r*G/TP .. (r+1)*G/TP - 1.
* ``linear_fc1.weight`` [2F / TP, H]: rank r holds [gate rows of r; up rows of r].
* ``linear_proj`` / ``linear_fc2`` (row-parallel): split along the input dim (dim 1).
* ``word_embeddings`` / ``output_layer`` (vocab-parallel): split along the vocab (dim 0); the
  vocab is zero-padded to a multiple of TP (:attr:`DenseShape.padded_vocab`).
* norms (and q/k norms): replicated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

SUPPORTED_MODEL_TYPES = ("qwen3", "qwen2", "llama")

# Transformer-Engine spec names -> local spec names (same tensors, norm fused into the linear).
_TE_ALIASES = {
    "self_attention.linear_qkv.layer_norm_weight": "input_layernorm.weight",
    "mlp.linear_fc1.layer_norm_weight": "pre_mlp_layernorm.weight",
}
_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.+)$")


@dataclass(frozen=True)
class DenseShape:
    """The dimensions of a dense decoder that the mapping needs."""

    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    layers: int
    tied: bool
    qkv_bias: bool
    qk_norm: bool
    tp: int = 1

    @property
    def padded_vocab(self) -> int:
        """Vocab rounded up to a multiple of TP (Megatron splits the vocab evenly)."""
        return -(-self.vocab // self.tp) * self.tp

    @classmethod
    def from_hf(cls, hf_config: Any, tp: int = 1) -> DenseShape:
        model_type = getattr(hf_config, "model_type", None)
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"the megatron engine converts {SUPPORTED_MODEL_TYPES} checkpoints, got "
                f"model_type={model_type!r}: use the fsdp engine for this model"
            )
        heads = hf_config.num_attention_heads
        kv_heads = getattr(hf_config, "num_key_value_heads", None) or heads
        head_dim = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // heads
        if kv_heads % tp:
            raise ValueError(
                f"tensor_parallel={tp} must divide num_key_value_heads={kv_heads} "
                "(each TP rank holds whole KV groups): lower [engines.train.options] "
                "tensor_parallel"
            )
        return cls(
            hidden=hf_config.hidden_size,
            ffn=hf_config.intermediate_size,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            vocab=hf_config.vocab_size,
            layers=hf_config.num_hidden_layers,
            tied=bool(getattr(hf_config, "tie_word_embeddings", False)),
            qkv_bias=model_type == "qwen2" or bool(getattr(hf_config, "attention_bias", False)),
            qk_norm=model_type == "qwen3",
            tp=tp,
        )


@dataclass(frozen=True)
class HFNames:
    """Where the trunk and head live in the HF state dict (policy vs value model)."""

    trunk: str = "model."
    """Prefix of the decoder trunk: ``model.`` (causal LM) or ``trunk.`` (value model)."""
    head: str = "lm_head"
    """``lm_head`` (causal LM, weight only) or ``value_head`` (value model, weight + bias)."""


POLICY_NAMES = HFNames()
VALUE_NAMES = HFNames(trunk="trunk.", head="value_head")


def canonical(name: str) -> str:
    """Local-spec name for a Megatron parameter name (TE fused-norm names mapped)."""
    match = _LAYER.match(name)
    if match:
        rest = _TE_ALIASES.get(match.group(2), match.group(2))
        return f"decoder.layers.{match.group(1)}.{rest}"
    return name


def _layer_hf(names: HFNames, layer: int) -> str:
    return f"{names.trunk}layers.{layer}."


def hf_sources(name: str, names: HFNames = POLICY_NAMES) -> list[str]:
    """HF tensor names that make up Megatron parameter ``name`` (global layer index)."""
    name = canonical(name)
    t = names.trunk
    direct = {
        "embedding.word_embeddings.weight": [f"{t}embed_tokens.weight"],
        "decoder.final_layernorm.weight": [f"{t}norm.weight"],
        "output_layer.weight": [f"{names.head}.weight"],
        "output_layer.bias": [f"{names.head}.bias"],
    }
    if name in direct:
        return direct[name]
    match = _LAYER.match(name)
    if not match:
        raise KeyError(f"no HF mapping for Megatron parameter {name!r}")
    p, rest = _layer_hf(names, int(match.group(1))), match.group(2)
    per_layer = {
        "input_layernorm.weight": ["input_layernorm.weight"],
        "pre_mlp_layernorm.weight": ["post_attention_layernorm.weight"],
        "self_attention.linear_qkv.weight": [f"self_attn.{x}_proj.weight" for x in "qkv"],
        "self_attention.linear_qkv.bias": [f"self_attn.{x}_proj.bias" for x in "qkv"],
        "self_attention.linear_proj.weight": ["self_attn.o_proj.weight"],
        "self_attention.q_layernorm.weight": ["self_attn.q_norm.weight"],
        "self_attention.k_layernorm.weight": ["self_attn.k_norm.weight"],
        "mlp.linear_fc1.weight": ["mlp.gate_proj.weight", "mlp.up_proj.weight"],
        "mlp.linear_fc2.weight": ["mlp.down_proj.weight"],
    }
    if rest not in per_layer:
        raise KeyError(f"no HF mapping for Megatron parameter {name!r}")
    return [p + s for s in per_layer[rest]]


def _pad_vocab(t: torch.Tensor, shape: DenseShape) -> torch.Tensor:
    if t.shape[0] == shape.padded_vocab:
        return t
    pad = t.new_zeros((shape.padded_vocab - t.shape[0], *t.shape[1:]))
    return torch.cat([t, pad])


def hf_to_shard(
    name: str, hf: Mapping[str, torch.Tensor], shape: DenseShape, tp_rank: int,
    names: HFNames = POLICY_NAMES,
) -> torch.Tensor:
    """The TP-rank ``tp_rank`` shard of Megatron parameter ``name`` built from HF tensors."""
    key = canonical(name)
    srcs = [hf[s] for s in hf_sources(key, names)]
    tp = shape.tp
    if key.endswith(("linear_qkv.weight", "linear_qkv.bias")):
        q, k, v = srcs
        g, d = shape.kv_heads, shape.head_dim
        trailing = q.shape[1:]  # (H,) for weights, () for biases
        fused = torch.cat(
            [q.reshape(g, shape.heads // g * d, *trailing), k.reshape(g, d, *trailing),
             v.reshape(g, d, *trailing)], dim=1)  # [G, (Q/G + 2) d, ...]
        return fused.chunk(tp, dim=0)[tp_rank].reshape(-1, *trailing).clone()
    if key.endswith("linear_fc1.weight"):
        gate, up = srcs
        return torch.cat([gate.chunk(tp)[tp_rank], up.chunk(tp)[tp_rank]]).clone()
    if key.endswith(("linear_proj.weight", "linear_fc2.weight")):
        return srcs[0].chunk(tp, dim=1)[tp_rank].clone()
    if key == "embedding.word_embeddings.weight" or (
        key == "output_layer.weight" and names.head == "lm_head"
    ):
        return _pad_vocab(srcs[0], shape).chunk(tp)[tp_rank].clone()
    return srcs[0].clone()  # replicated: norms, value head


def shards_to_hf(
    name: str, shards: list[torch.Tensor], shape: DenseShape, names: HFNames = POLICY_NAMES,
) -> dict[str, torch.Tensor]:
    """HF tensors of Megatron parameter ``name`` from its TP shards (rank order)."""
    key = canonical(name)
    dst = hf_sources(key, names)
    if key.endswith(("linear_qkv.weight", "linear_qkv.bias")):
        g, d, per = shape.kv_heads, shape.head_dim, shape.heads // shape.kv_heads
        trailing = shards[0].shape[1:]
        fused = torch.cat(shards).reshape(g, (per + 2) * d, *trailing)
        q, k, v = fused.split([per * d, d, d], dim=1)
        return {dst[0]: q.reshape(-1, *trailing).contiguous(),
                dst[1]: k.reshape(-1, *trailing).contiguous(),
                dst[2]: v.reshape(-1, *trailing).contiguous()}
    if key.endswith("linear_fc1.weight"):
        halves = [s.chunk(2) for s in shards]  # each rank: [gate_r; up_r]
        return {dst[0]: torch.cat([h[0] for h in halves]),
                dst[1]: torch.cat([h[1] for h in halves])}
    if key.endswith(("linear_proj.weight", "linear_fc2.weight")):
        return {dst[0]: torch.cat(shards, dim=1)}
    if key == "embedding.word_embeddings.weight" or (
        key == "output_layer.weight" and names.head == "lm_head"
    ):
        return {dst[0]: torch.cat(shards)[: shape.vocab].contiguous()}
    return {dst[0]: shards[0].clone()}


def is_tp_sharded(name: str, names: HFNames = POLICY_NAMES) -> bool:
    """Whether Megatron splits parameter ``name`` across TP ranks (else it is replicated)."""
    key = canonical(name)
    if key == "output_layer.weight":
        return names.head == "lm_head"
    return key.endswith((
        "linear_qkv.weight", "linear_qkv.bias", "linear_fc1.weight", "linear_proj.weight",
        "linear_fc2.weight",
    )) or key == "embedding.word_embeddings.weight"


def hf_key_order(shape: DenseShape, names: HFNames = POLICY_NAMES) -> list[str]:
    """HF state-dict keys in ``transformers``' order (the export's key order)."""
    t = names.trunk
    keys = [f"{t}embed_tokens.weight"]
    for layer in range(shape.layers):
        p = _layer_hf(names, layer)
        keys += [p + f"self_attn.{x}_proj.weight" for x in "qkv"]
        if shape.qkv_bias:
            keys += [p + f"self_attn.{x}_proj.bias" for x in "qkv"]
        keys.append(p + "self_attn.o_proj.weight")
        if shape.qk_norm:
            keys += [p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight"]
        keys += [p + "mlp.gate_proj.weight",
                 p + "mlp.up_proj.weight", p + "mlp.down_proj.weight",
                 p + "input_layernorm.weight", p + "post_attention_layernorm.weight"]
    keys.append(f"{t}norm.weight")
    keys += [f"{names.head}.weight"] + ([f"{names.head}.bias"] if names.head != "lm_head" else [])
    return keys
