"""The ``megatron`` training engine: Megatron-core GPT with TP / PP (+VPP) / DP.

One instance per rank and role. Ranks of one data-parallel (DP) group (the TP x PP ranks
holding one model copy) must get the SAME batch; :attr:`dp_rank` / :attr:`dp_size` tell the
trainer how to shard, :attr:`writes_outputs` which rank publishes results (TP rank 0 of the
last pipeline stage). Every method runs on every rank (they all join the collectives).

Data layout: :class:`ModelBatch` rows are ``[pad.. prompt | response ..pad]``; Megatron's RoPE
ignores ``position_ids``, so each row is shifted left to start at column 0 (right padding
only). Then the plain causal mask is exact and positions match HF's 0, 1, 2...
The logits predicting ``responses[:, t]`` of a row with ``s`` leading pads sit at column
``P - s - 1 + t``.

Gradient convention (as in the ``fsdp`` engine): ``loss_fn`` divides by the GLOBAL normaliser,
so the true gradient is the SUM over micro-batches and DP ranks. ``calculate_per_token_loss``
turns off Megatron's averaging (schedules and DDP) and the finalize hook is called without a
token count, so nothing rescales the sum.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

import torch
import torch.distributed as dist

try:
    from megatron.core import parallel_state as mpu
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the megatron training engine needs megatron-core: pip install megatron-core==0.16.1 "
        "(with torch==2.13.0+cpu on the same line on CPU machines; see docs/megatron.md)"
    ) from exc
from megatron.core.distributed import (
    DistributedDataParallel,
    DistributedDataParallelConfig,
    finalize_model_grads,
)
from megatron.core.pipeline_parallel import get_forward_backward_func

from rlctl.engines.distributed import all_reduce_sum, ensure_process_group, group_device
from rlctl.engines.train.batch import ModelBatch
from rlctl.engines.train.contract import LossFn, ModelEngineSpec
from rlctl.engines.train.log_probs import token_log_probs
from rlctl.engines.train.lr_schedule import build_optimizer_and_schedule
from rlctl.engines.train.megatron.convert import POLICY_NAMES, VALUE_NAMES, DenseShape
from rlctl.engines.train.megatron.model import (
    build_chunks,
    gather_hf,
    load_hf_into,
    transformer_config,
)
from rlctl.engines.train.megatron.options import MegatronOptions
from rlctl.engines.train.megatron.parallel import grad_norm, init_model_parallel, unwrap
from rlctl.engines.train.metrics import plain, reduce_micro_batches
from rlctl.models.loading import load_causal_lm, load_tokenizer, load_value_model, torch_dtype


class MegatronEngine:
    """One rank of a Megatron-core actor, reference or critic (see the module docstring)."""

    def __init__(self, spec: ModelEngineSpec) -> None:
        self.spec = spec
        self.options = spec.options_as(MegatronOptions)
        self.device = torch.device(spec.device)
        self.chunks: list[Any] = []  # DDP-wrapped (trainable roles) or bare GPTModel chunks
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: torch.optim.lr_scheduler.LambdaLR | None = None
        self.names = VALUE_NAMES if spec.role == "critic" else POLICY_NAMES
        self.pad_id = 0
        self.dp_rank, self.dp_size, self.writes_outputs = spec.rank, spec.world_size, True

    # ------------------------------------------------------------------ setup
    def init(self) -> None:
        spec, opts = self.spec, self.options
        ensure_process_group(spec.rank, spec.world_size, spec.device)
        init_model_parallel(opts, spec.world_size, spec.seed, self.device.type)
        self.dp_rank = mpu.get_data_parallel_rank()
        self.dp_size = mpu.get_data_parallel_world_size()
        self.is_last_stage = mpu.is_pipeline_last_stage(ignore_virtual=True)
        self.writes_outputs = (mpu.get_tensor_model_parallel_rank() == 0 and self.is_last_stage
                               and mpu.get_context_parallel_rank() == 0)
        self.pad_id = int(load_tokenizer(spec.model).pad_token_id)
        seed = spec.seed
        # Every rank loads the full HF model on CPU and keeps its own shards of it.
        if spec.role == "critic":
            hf_model = load_value_model(spec.model, seed, path=spec.value_model_path)
            self.hf_config = hf_model.trunk.config
        else:
            hf_model = load_causal_lm(spec.model, seed)
            self.hf_config = hf_model.config
        self.shape = DenseShape.from_hf(self.hf_config, opts.tensor_parallel)
        dtype = torch_dtype(spec.model.dtype)
        # [model] gradient_checkpointing means full recomputation unless the options say more.
        recompute = opts.recompute_granularity or (
            "full" if spec.model.gradient_checkpointing and spec.role != "ref" else None)
        self.config = transformer_config(self.hf_config, opts, dtype, self.device.type == "cpu",
                                         recompute)
        chunks = build_chunks(self.config, self.hf_config, self.shape,
                              value_head=spec.role == "critic",
                              transformer_impl=opts.transformer_impl)
        load_hf_into(chunks, hf_model.state_dict(), self.shape, self.names)
        del hf_model
        chunks = [c.to(self.device) for c in chunks]
        if spec.role == "ref":
            for c in chunks:
                c.requires_grad_(False)
                c.eval()
            self.chunks = chunks
            return
        ddp_config = DistributedDataParallelConfig(
            grad_reduce_in_fp32=True, overlap_grad_reduce=False, use_distributed_optimizer=False)
        self.chunks = [
            DistributedDataParallel(config=self.config, ddp_config=ddp_config, module=c,
                                    disable_bucketing=i > 0)
            for i, c in enumerate(chunks)
        ]
        # Our loss is globally normalised: never let finalize rescale by a token count.
        self.config.finalize_model_grads_func = (
            lambda model, num_tokens=None, **kw: finalize_model_grads(model, None, **kw))
        self.optimizer, self.scheduler = build_optimizer_and_schedule(self._params(), spec)

    def _params(self) -> list[torch.nn.Parameter]:
        return [p for c in self.chunks for p in c.parameters() if p.requires_grad]

    def _require_model(self) -> list[Any]:
        if not self.chunks:
            raise RuntimeError(f"{self.spec.role} engine used before init(): call init() first")
        return self.chunks

    # ------------------------------------------------------------------ data
    def _micro_batches(self, batch: ModelBatch, size: int, fields: Mapping[str, torch.Tensor]
                       ) -> list[dict[str, Any]]:
        """Equal-shape micro-batches (pipeline p2p needs one shape): [size, S] each, rows past
        the batch end are copies of the last row with ``n_real`` marking the real ones."""
        if batch.batch_size == 0:
            raise ValueError(f"{self.spec.role} rank {self.spec.rank} got an empty batch")
        size = min(size, batch.batch_size)  # no padding rows beyond a single micro-batch
        lengths = batch.attention_mask.sum(1)  # [B]
        starts = batch.attention_mask.shape[1] - batch.response_width - (
            batch.attention_mask[:, : batch.prompt_width].sum(1))  # leading pads [B]
        width = int(lengths.max())
        tp = self.options.tensor_parallel
        if self.options.sequence_parallel:  # the sequence is split over TP ranks
            width = -(-width // tp) * tp
        cols = torch.arange(width)[None] + starts[:, None]  # [B, S] source columns
        valid = torch.arange(width)[None] < lengths[:, None]
        ids = batch.input_ids.gather(1, cols.clamp(max=batch.input_ids.shape[1] - 1))
        ids = torch.where(valid, ids, self.pad_id)  # [B, S], right-padded
        index = (batch.prompt_width - starts - 1)[:, None] + torch.arange(batch.response_width)
        index = index.clamp(max=width - 1)  # [B, R] logit column of each response token
        n_micro = -(-batch.batch_size // size)
        if self.options.virtual_pipeline_parallel:  # interleaving wants whole PP groups
            pp = self.options.pipeline_parallel
            n_micro = -(-n_micro // pp) * pp
        out = []
        for m in range(n_micro):
            rows = torch.arange(m * size, (m + 1) * size).clamp(max=batch.batch_size - 1)
            n_real = max(0, min(size, batch.batch_size - m * size))
            out.append({
                "input_ids": ids[rows].to(self.device),
                "position_ids": torch.arange(width).expand(size, width).to(self.device),
                "index": index[rows].to(self.device),
                "responses": batch.responses[rows].to(self.device),
                "response_mask": batch.response_mask[rows].to(self.device),
                "fields": {k: v[rows[:n_real]].to(self.device) for k, v in fields.items()},
                "n_real": n_real,
                "rows": (m * size, m * size + n_real),
            })
        return out

    def _forward_step(self, temperature: float, with_entropy: bool, loss_fn: LossFn | None,
                      data_iterator: Iterator[dict[str, Any]], model: Any) -> tuple[Any, Any]:
        mb = next(data_iterator)
        output = model(mb["input_ids"], mb["position_ids"], None, runtime_gather_output=True)
        return output, partial(self._loss_func, mb, temperature, with_entropy, loss_fn)

    def _outputs(self, mb: dict[str, Any], output: torch.Tensor, temperature: float,
                 with_entropy: bool) -> dict[str, torch.Tensor]:
        """Per-token outputs [b, R] of a micro-batch from the last stage's output [b, S, *]."""
        mask = mb["response_mask"]
        if self.spec.role == "critic":
            values = output[..., 0].float().gather(1, mb["index"])  # [b, R]
            return {"values": values * mask}
        logits = output[..., : self.shape.vocab]  # drop the TP vocab padding
        picked = logits.gather(1, mb["index"][..., None].expand(-1, -1, logits.shape[-1]))
        log_probs, entropy = token_log_probs(picked, mb["responses"], temperature, with_entropy)
        out = {"log_probs": log_probs * mask}
        if entropy is not None:
            out["entropy"] = entropy * mask
        return out

    def _loss_func(self, mb: dict[str, Any], temperature: float, with_entropy: bool,
                   loss_fn: LossFn | None, output: torch.Tensor) -> tuple[Any, Any, Any]:
        """Megatron's 3-tuple loss contract: (loss for backward, token count, reported)."""
        n = mb["n_real"]
        outputs = self._outputs(mb, output, temperature, with_entropy)
        zero = output.sum() * 0.0  # keeps the graph (and the pipeline backward) connected
        count = torch.tensor(1, dtype=torch.int)
        if loss_fn is None:  # forward only: hand the outputs back through the schedule
            return zero, count, {k: v[:n].detach().cpu() for k, v in outputs.items()}
        if n == 0:
            return zero, count, {}
        if self.spec.role != "critic" and not self.spec.entropy_in_loss:
            outputs["entropy"] = outputs["entropy"].detach()
        loss, metrics = loss_fn({k: v[:n] for k, v in outputs.items()}, mb["fields"])
        reported = {k: plain(v) for k, v in metrics.items()}
        reported["__loss"] = float(loss.detach())
        return loss + zero, count, reported

    def _run_schedule(self, micro: list[dict[str, Any]], forward_only: bool, temperature: float,
                      with_entropy: bool, loss_fn: LossFn | None) -> list[Any]:
        chunks = self._require_model()
        n_chunks = len(chunks)
        iterators: Any = [iter(micro) for _ in chunks] if n_chunks > 1 else iter(micro)
        return get_forward_backward_func()(
            forward_step_func=partial(self._forward_step, temperature, with_entropy, loss_fn),
            data_iterator=iterators,
            model=chunks if n_chunks > 1 else chunks[0],
            num_microbatches=len(micro),
            seq_length=micro[0]["input_ids"].shape[1],
            micro_batch_size=micro[0]["input_ids"].shape[0],
            forward_only=forward_only,
        )

    # ------------------------------------------------------------------ inference
    def _forward_only(self, batch: ModelBatch, temperature: float, with_entropy: bool
                      ) -> dict[str, torch.Tensor]:
        """Per-token outputs [B, R]: real on the last stage, zeros on earlier stages."""
        for c in self._require_model():
            c.eval()
        size = self.spec.log_prob_micro_batch_size
        micro = self._micro_batches(batch, size, {})
        with torch.no_grad():
            store = self._run_schedule(micro, True, temperature, with_entropy, None)
        shape = (batch.batch_size, batch.response_width)
        keys = ["values"] if self.spec.role == "critic" else (
            ["log_probs", "entropy"] if with_entropy else ["log_probs"])
        if not self.is_last_stage:
            return {k: torch.zeros(shape) for k in keys}
        return {k: torch.cat([d[k] for d in store])[: batch.batch_size] for k in keys}

    def compute_log_prob(self, batch: ModelBatch, *, temperature: float,
                         with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(log_probs [B, R], entropy [B, R] | None)``, zero on padding, no grad.

        Real values on every rank of the last pipeline stage; zeros on earlier stages.
        """
        if self.spec.role == "critic":
            raise RuntimeError("compute_log_prob on a critic engine: use compute_values")
        out = self._forward_only(batch, temperature, with_entropy)
        return out["log_probs"], out.get("entropy")

    def compute_values(self, batch: ModelBatch) -> torch.Tensor:
        """``values [B, R]`` (critic), zero on padding; zeros on non-last pipeline stages."""
        if self.spec.role != "critic":
            raise RuntimeError(f"compute_values on a {self.spec.role} engine: use a critic")
        return self._forward_only(batch, 1.0, False)["values"]

    # ------------------------------------------------------------------ update
    def train_minibatch(self, batch: ModelBatch, fields: Mapping[str, torch.Tensor],
                        loss_fn: LossFn, *, temperature: float = 1.0) -> dict[str, Any]:
        """One optimizer step through Megatron's schedule; every rank of a DP group gets the
        same ``batch``. Metrics (as the fsdp engine's) are correct on the last stage; ``loss``
        is the minibatch loss summed over micro-batches and DP groups."""
        chunks = self._require_model()
        if self.optimizer is None or self.scheduler is None:
            raise RuntimeError(f"train_minibatch on a {self.spec.role} engine (no optimizer)")
        for key, value in fields.items():
            if value.shape[0] != batch.batch_size:
                raise ValueError(
                    f"field {key!r} has {value.shape[0]} rows but the batch has "
                    f"{batch.batch_size}: fields must be per-sample and in batch order")
        for c in chunks:
            c.train()
            c.zero_grad_buffer()
        micro = self._micro_batches(batch, self.spec.micro_batch_size, fields)
        store = self._run_schedule(micro, False, temperature, self.spec.role != "critic",
                                   loss_fn)
        reported = [d for d in store if d]
        local_loss = sum(d.get("__loss", 0.0) for d in reported)
        result: dict[str, Any] = reduce_micro_batches(
            {k: v for k, v in d.items() if k != "__loss"} for d in reported
        )
        result["loss"] = self._dp_sum(local_loss) if self.is_last_stage else local_loss
        result.update(self._optimizer_step())
        return result

    def _dp_sum(self, value: float) -> float:
        group = mpu.get_data_parallel_group()
        return all_reduce_sum(value, group_device(group), group=group)

    def _optimizer_step(self) -> dict[str, float]:
        assert self.optimizer is not None and self.scheduler is not None
        params = self._params()
        for p in params:  # DDP accumulated (and reduced) gradients in its fp32 buffers
            p.grad = p.main_grad.to(p.dtype)
        clip = self.spec.optimizer.grad_clip if self.spec.optimizer is not None else None
        norm = grad_norm(params)
        if clip and math.isfinite(norm) and norm > clip:
            for p in params:
                p.grad.mul_(clip / (norm + 1e-6))
        lr = float(self.scheduler.get_last_lr()[0])
        if math.isfinite(norm):  # a non-finite norm skips the update, the schedule advances
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"grad_norm": norm, "lr": lr}

    # ------------------------------------------------------------------ weights
    def export_weights(self) -> dict[str, torch.Tensor]:
        """Full HF-named CPU weights on global rank 0 (TP shards and PP stages gathered);
        ``{}`` on other ranks. Every rank must call it."""
        return gather_hf([unwrap(c) for c in self._require_model()], self.shape, self.names)

    def _checkpoint_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"model": [unwrap(c).state_dict() for c in self.chunks],
                                 "layout": [self.options.tensor_parallel,
                                            self.options.pipeline_parallel,
                                            self.options.virtual_pipeline_parallel or 0]}
        if self.optimizer is not None and self.scheduler is not None:
            state["optimizer"] = self.optimizer.state_dict()
            state["scheduler"] = self.scheduler.state_dict()
        return state

    def _shard_file(self, path: str) -> str:
        tp, pp = mpu.get_tensor_model_parallel_rank(), mpu.get_pipeline_model_parallel_rank()
        return os.path.join(path, f"mp_tp{tp:02d}_pp{pp:02d}.pt")

    def save(self, path: str) -> None:
        """One file per (TP, PP) shard, written by DP rank 0 (DP replicas are identical)."""
        self._require_model()
        if self.dp_rank == 0:
            os.makedirs(path, exist_ok=True)
            torch.save(self._checkpoint_state(), self._shard_file(path))
        dist.barrier()

    def load(self, path: str) -> None:
        """Restore a checkpoint of :meth:`save` written with the same TP / PP / VPP layout."""
        self._require_model()
        file = self._shard_file(path)
        if not os.path.exists(file):
            raise FileNotFoundError(
                f"{file} not found: a megatron checkpoint is loaded with the TP/PP layout it "
                "was saved with (one file per TP x PP shard)")
        state = torch.load(file, map_location="cpu", weights_only=True)
        want = self._checkpoint_state()["layout"]
        if state["layout"] != want:
            raise ValueError(f"checkpoint {path} has layout TP/PP/VPP={state['layout']} but "
                             f"this engine runs {want}: load it with the same options")
        for chunk, chunk_state in zip(self.chunks, state["model"], strict=True):
            unwrap(chunk).load_state_dict(chunk_state)
        if self.optimizer is not None and self.scheduler is not None:
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])

    def close(self) -> None:
        """Drop the model; process groups stay (other engines in this process share them)."""
        self.chunks, self.optimizer, self.scheduler = [], None, None

