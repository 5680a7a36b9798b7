"""Build Megatron-core GPT model chunks for an HF decoder and move weights in and out.

One rank holds ``len(chunks)`` model chunks (one per virtual pipeline stage) of its pipeline
stage and its tensor-parallel shard of each. Weights come from the HF model every rank loads
at init (:func:`load_hf_into`); :func:`gather_hf` rebuilds the full HF state dict on global
rank 0 (TP all-gather inside each stage, then one flat point-to-point message per stage).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist
from megatron.core import parallel_state as mpu
from megatron.core import tensor_parallel
from megatron.core.models.gpt import GPTModel
from megatron.core.transformer import TransformerConfig
from torch import nn

from rlctl.engines.train.megatron.convert import (
    DenseShape,
    HFNames,
    canonical,
    hf_key_order,
    hf_to_shard,
    is_tp_sharded,
    shards_to_hf,
)
from rlctl.engines.train.megatron.options import MegatronOptions


def transformer_config(
    hf_config: Any, options: MegatronOptions, dtype: torch.dtype, on_cpu: bool,
    recompute: str | None = None,
) -> TransformerConfig:
    """Megatron's config for an HF Qwen3/Qwen2/Llama config (dropout off: RL wants exact
    log-prob ratios; fused kernels off unless Transformer Engine provides them).

    ``recompute``: ``full`` / ``selective`` activation recomputation, or ``None``.
    """
    shape = DenseShape.from_hf(hf_config, options.tensor_parallel)
    extra: dict[str, Any] = {}
    if recompute == "full":
        extra = {"recompute_granularity": "full", "recompute_method": "uniform",
                 "recompute_num_layers": 1}
    elif recompute == "selective":
        extra = {"recompute_granularity": "selective"}
    return TransformerConfig(
        num_layers=shape.layers,
        hidden_size=shape.hidden,
        ffn_hidden_size=shape.ffn,
        num_attention_heads=shape.heads,
        num_query_groups=shape.kv_heads,
        kv_channels=shape.head_dim,
        normalization="RMSNorm",
        layernorm_epsilon=float(getattr(hf_config, "rms_norm_eps", 1e-6)),
        gated_linear_unit=True,
        activation_func=torch.nn.functional.silu,
        add_bias_linear=False,
        add_qkv_bias=shape.qkv_bias,
        qk_layernorm=shape.qk_norm,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        attention_softmax_in_fp32=True,
        tensor_model_parallel_size=options.tensor_parallel,
        pipeline_model_parallel_size=options.pipeline_parallel,
        virtual_pipeline_model_parallel_size=options.virtual_pipeline_parallel,
        context_parallel_size=options.context_parallel,
        expert_model_parallel_size=options.expert_parallel,
        sequence_parallel=options.sequence_parallel,
        params_dtype=dtype,
        pipeline_dtype=dtype,
        bf16=dtype == torch.bfloat16,
        fp16=dtype == torch.float16,
        use_cpu_initialization=on_cpu,
        perform_initialization=False,  # every weight is loaded from the HF checkpoint
        # The trainer's loss is already divided by the GLOBAL normaliser: per-token mode
        # stops the schedules and DDP from averaging over micro-batches / DP ranks.
        calculate_per_token_loss=True,
        masked_softmax_fusion=False,
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        apply_rope_fusion=False,
        gradient_accumulation_fusion=False,
        persist_layer_norm=False,
        **extra,
    )


def rope_theta(hf_config: Any) -> float:
    params = getattr(hf_config, "rope_parameters", None) or {}
    return float(params.get("rope_theta", getattr(hf_config, "rope_theta", 10000.0)))


class ValueHead(nn.Module):
    """Scalar head in place of GPTModel's ``output_layer``: hidden [S, b, H] -> [S, b, 1]."""

    def __init__(self, hidden: int, dtype: torch.dtype, sequence_parallel: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1, hidden, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(1, dtype=dtype))
        self.sequence_parallel = sequence_parallel

    def forward(self, hidden: torch.Tensor, weight: Any = None, runtime_gather_output: Any = None
                ) -> tuple[torch.Tensor, None]:
        if self.sequence_parallel:  # [S/TP, b, H] -> [S, b, H]
            hidden = tensor_parallel.gather_from_sequence_parallel_region(hidden)
        return torch.nn.functional.linear(hidden, self.weight, self.bias), None


def build_chunks(
    config: TransformerConfig, hf_config: Any, shape: DenseShape, *, value_head: bool,
    transformer_impl: str,
) -> list[GPTModel]:
    """This rank's model chunks (one per virtual stage), weights uninitialised."""
    if transformer_impl == "transformer_engine":
        from megatron.core.models.gpt.gpt_layer_specs import (
            get_gpt_layer_with_transformer_engine_spec as spec_fn,
        )
        spec = spec_fn(qk_layernorm=shape.qk_norm)
    else:
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

        spec = get_gpt_layer_local_spec(qk_layernorm=shape.qk_norm, normalization="RMSNorm")
    vpp = config.virtual_pipeline_model_parallel_size
    chunks = []
    for stage in range(vpp or 1):
        vp_stage = stage if vpp else None
        post = mpu.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp_stage)
        model = GPTModel(
            config=config,
            transformer_layer_spec=spec,
            vocab_size=shape.padded_vocab,
            max_sequence_length=int(getattr(hf_config, "max_position_embeddings", 4096)),
            pre_process=mpu.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp_stage),
            post_process=post,
            share_embeddings_and_output_weights=shape.tied and not value_head,
            position_embedding_type="rope",
            rotary_base=rope_theta(hf_config),
            vp_stage=vp_stage,
        )
        if value_head and post:
            model.output_layer = ValueHead(shape.hidden, config.params_dtype,
                                           config.sequence_parallel)
        chunks.append(model)
    return chunks


def global_names(chunk: nn.Module) -> dict[str, nn.Parameter]:
    """``{global megatron name: parameter}`` of one chunk (layer indices made global)."""
    layers = chunk.decoder.layers
    out = {}
    for name, param in chunk.named_parameters():
        if name.startswith("decoder.layers."):
            local, rest = name[len("decoder.layers."):].split(".", 1)
            layer = layers[int(local)].layer_number - 1  # layer_number is global, 1-based
            name = f"decoder.layers.{layer}.{rest}"
        out[canonical(name)] = param
    return out


def _is_tied_copy(name: str, param: nn.Parameter, names: HFNames, shape: DenseShape) -> bool:
    """The last stage's copy of tied embeddings (PP > 1): the first stage owns the tensor."""
    return name == "output_layer.weight" and shape.tied and names.head == "lm_head"


@torch.no_grad()
def load_hf_into(chunks: list[nn.Module], hf: Mapping[str, torch.Tensor], shape: DenseShape,
                 names: HFNames) -> None:
    """Copy this rank's TP shard of every parameter from the full HF state dict ``hf``.

    Also marks TP-sharded parameters as such: Megatron sets ``tensor_model_parallel`` only
    when it initialises weights itself (``perform_initialization``), which we skip; the
    gradient norm needs the mark to count replicated tensors once.
    """
    tp_rank = mpu.get_tensor_model_parallel_rank()
    for chunk in chunks:
        for name, param in global_names(chunk).items():
            if is_tp_sharded(name, names) and not getattr(param, "tensor_model_parallel", False):
                dim = 1 if name.endswith(("linear_proj.weight", "linear_fc2.weight")) else 0
                tensor_parallel.set_tensor_model_parallel_attributes(param, True, dim, 1)
            src = hf_to_shard(name, hf, shape, tp_rank, names)
            if src.shape != param.shape:
                raise RuntimeError(
                    f"converted HF weight for {name!r} has shape {tuple(src.shape)} but the "
                    f"Megatron parameter has {tuple(param.shape)}: the mapping in "
                    "rlctl.engines.train.megatron.convert does not fit this model"
                )
            param.copy_(src)


def _tp_gather(t: torch.Tensor) -> list[torch.Tensor]:
    group = mpu.get_tensor_model_parallel_group()
    shards = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(shards, t.contiguous(), group=group)
    return shards


def _owned(chunks: list[nn.Module], shape: DenseShape) -> torch.Tensor:
    """[layers + 2] int: 1 for each global layer, embedding, final norm/head this stage holds."""
    owned = torch.zeros(shape.layers + 2, dtype=torch.long)
    for chunk in chunks:
        owned[shape.layers] |= int(chunk.pre_process)
        owned[shape.layers + 1] |= int(chunk.post_process)
        for layer in chunk.decoder.layers:
            owned[layer.layer_number - 1] = 1
    return owned


def _keys_of(owned: torch.Tensor, shape: DenseShape, names: HFNames) -> list[str]:
    """HF keys a stage with ownership vector ``owned`` sends (export order)."""
    keys = []
    for key in hf_key_order(shape, names):
        if key.startswith(f"{names.trunk}layers."):
            mine = bool(owned[int(key[len(names.trunk) + 7:].split(".", 1)[0])])
        elif key.startswith(f"{names.trunk}embed_tokens"):
            mine = bool(owned[shape.layers])
        elif key.startswith(f"{names.head}.") and shape.tied and names.head == "lm_head":
            mine = False  # tied: rank 0 copies it from the embedding
        else:
            mine = bool(owned[shape.layers + 1])
        if mine:
            keys.append(key)
    return keys


@torch.no_grad()
def gather_hf(chunks: list[nn.Module], shape: DenseShape, names: HFNames
              ) -> dict[str, torch.Tensor]:
    """Full HF-named CPU weights on global rank 0, ``{}`` elsewhere; every rank must call it."""
    if mpu.get_data_parallel_rank() != 0 or mpu.get_context_parallel_rank() != 0:
        return {}  # replicas: dp 0 / cp 0 hold the same weights
    local: dict[str, torch.Tensor] = {}
    for chunk in chunks:
        for name, param in global_names(chunk).items():
            if _is_tied_copy(name, param, names, shape) and not chunk.pre_process:
                continue
            shards = _tp_gather(param.data) if is_tp_sharded(name, names) else [param.data]
            local.update(shards_to_hf(name, [s.cpu() for s in shards], shape, names))
    if mpu.get_tensor_model_parallel_rank() != 0:
        return {}
    pp_group = mpu.get_pipeline_model_parallel_group()
    owned = _owned(chunks, shape)
    table = [torch.zeros_like(owned) for _ in range(dist.get_world_size(pp_group))]
    dist.all_gather(table, owned, group=pp_group)
    stage_ranks = dist.get_process_group_ranks(pp_group)
    pp_rank = mpu.get_pipeline_model_parallel_rank()
    if pp_rank != 0:
        keys = _keys_of(owned, shape, names)
        flat = torch.cat([local[k].reshape(-1) for k in keys])
        dist.send(flat.contiguous(), dst=stage_ranks[0], group=pp_group)
        return {}
    full = dict(local)
    ref = next(iter(local.values()))
    for stage in range(1, len(stage_ranks)):
        keys = _keys_of(table[stage], shape, names)
        sizes = [_hf_shape(k, shape, names) for k in keys]
        flat = torch.empty(sum(s.numel() for s in sizes), dtype=ref.dtype)
        dist.recv(flat, src=stage_ranks[stage], group=pp_group)
        for key, size, part in zip(keys, sizes, flat.split([s.numel() for s in sizes]),
                                   strict=True):
            full[key] = part.reshape(size)
    if shape.tied and names.head == "lm_head":
        full[f"{names.head}.weight"] = full[f"{names.trunk}embed_tokens.weight"].clone()
    return {k: full[k] for k in hf_key_order(shape, names)}


def _hf_shape(key: str, shape: DenseShape, names: HFNames) -> torch.Size:
    """Shape of HF tensor ``key`` (to size the receive buffers)."""
    leaf = key.rsplit(".", 2)[-2] if key.endswith((".weight", ".bias")) else key
    h, d = shape.hidden, shape.head_dim
    bias = key.endswith(".bias")
    table = {
        "embed_tokens": (shape.vocab, h), "norm": (h,), "input_layernorm": (h,),
        "post_attention_layernorm": (h,), "q_norm": (d,), "k_norm": (d,),
        "q_proj": (shape.heads * d,) if bias else (shape.heads * d, h),
        "k_proj": (shape.kv_heads * d,) if bias else (shape.kv_heads * d, h),
        "v_proj": (shape.kv_heads * d,) if bias else (shape.kv_heads * d, h),
        "o_proj": (h, shape.heads * d), "gate_proj": (shape.ffn, h),
        "up_proj": (shape.ffn, h), "down_proj": (h, shape.ffn),
        "lm_head": (shape.vocab, h), "value_head": (1,) if bias else (1, h),
    }
    return torch.Size(table[leaf])
