"""The ``fsdp`` training engine: torch FSDP2 (``fully_shard``) for actor, reference and critic.

LoRA (``spec.lora``, the actor only): PEFT's LoRA layers are injected into the model before it
is sharded (:mod:`rlctl.models.lora`); FSDP2 shards the frozen base weights and the adapters
alike, only the adapters get gradients and optimizer state, checkpoints hold only them, and
``adapters=False`` runs the same module with its adapters off (the KL reference).

One instance per rank. Gloo on CPU, NCCL on CUDA. Every rank builds the same model from the
same seed, shards each decoder layer and then the root, and takes its rows of each batch
(the worker group splits batches across ranks).

Gradient convention: the loss function divides by the GLOBAL normaliser (all samples or
tokens of the minibatch on all ranks, summed with :func:`rlctl.engines.distributed.all_reduce_sum`),
so the true gradient is the SUM of per-rank gradients. FSDP2 averages across ranks by
default; we set its divide factor to 1 so the 2-rank update equals the 1-rank update (tested).

Collectives must line up: with FSDP2 every forward all-gathers, so all ranks must run the
same number of forwards. Ranks with fewer micro-batches run extra zero-weight passes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
)

from rlctl.checkpoint import safe_dcp
from rlctl.engines.distributed import all_reduce_max_int, all_reduce_sum, ensure_process_group
from rlctl.engines.train.batch import ModelBatch
from rlctl.engines.train.contract import LossFn, ModelEngineSpec
from rlctl.engines.train.fsdp.full_weights import (
    clip_sharded_grads,
    gathered_state_dict,
    gathered_trainable,
)
from rlctl.engines.train.fsdp.options import FSDPOptions
from rlctl.engines.train.log_probs import token_log_probs
from rlctl.engines.train.lr_schedule import build_optimizer_and_schedule
from rlctl.engines.train.metrics import reduce_micro_batches
from rlctl.engines.train.packing import pack, sample_lengths, token_budget_groups
from rlctl.engines.train.shared_prompt import (
    every_row_alone,
    prompt_groups,
    shared_prompt_logits,
)
from rlctl.engines.train.varlen_attention import use_varlen_attention
from rlctl.models.loading import load_causal_lm, load_tokenizer, load_value_model

if TYPE_CHECKING:
    from rlctl.models.lora import AdapterWeights

# shard_layers = None (auto): a model whose parameters fit in this is one FSDP unit
# (options.py says why).
WHOLE_MODEL_UNIT_BYTES = 64 * 2**20


class FSDPEngine:
    """One rank of an FSDP2 actor, reference or critic (see the module docstring)."""

    def __init__(self, spec: ModelEngineSpec) -> None:
        self.spec = spec
        self.options = spec.options_as(FSDPOptions)
        self.device = torch.device(spec.device)
        self.model: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: torch.optim.lr_scheduler.LambdaLR | None = None
        self.pad_id = 0
        # Pure data parallel: every rank is its own DP group and writes its outputs.
        self.dp_rank, self.dp_size, self.writes_outputs = spec.rank, spec.world_size, True
        self.hf_config: Any = None
        self.peft: Any = None  # the PeftModel around ``model`` when the actor trains LoRA

    # ------------------------------------------------------------------ setup
    def init(self) -> None:
        spec = self.spec
        ensure_process_group(spec.rank, spec.world_size, spec.device)
        seed = spec.seed
        self.pad_id = int(load_tokenizer(spec.model).pad_token_id)
        if spec.role == "critic":
            model = load_value_model(spec.model, seed, path=spec.value_model_path)
            layers = model.layers
        else:
            model = load_causal_lm(spec.model, seed)
            layers = model.get_decoder().layers
        self.hf_config = (model.trunk if spec.role == "critic" else model).config
        if spec.lora is not None:  # in place: ``model`` keeps its class and forward
            from rlctl.models.lora import add_adapters

            self.peft = add_adapters(model, spec.lora, seed=seed)
        if self.options.packing:  # every forward of this engine runs packed rows
            use_varlen_attention(model.trunk if spec.role == "critic" else model)
        if spec.model.gradient_checkpointing and spec.role != "ref":
            hf = model.trunk if spec.role == "critic" else model
            # transformers 5 renamed it (the old name warns, and goes in v6)
            enable = getattr(hf, "activation_checkpointing_enable", None)
            (enable or hf.gradient_checkpointing_enable)()
            if self.peft is not None:  # frozen embeddings: checkpointed layers need a grad input
                hf.enable_input_require_grads()
        if spec.role == "ref":
            model.requires_grad_(False)
        model.to(self.device)
        self._shard(model, layers)
        self.model = model
        torch.manual_seed(seed + spec.rank)  # dropout / sampling inside the engine, per rank
        if spec.role == "ref":
            model.eval()
            return
        self.optimizer, self.scheduler = build_optimizer_and_schedule(model.parameters(), spec)

    def _shard(self, model: nn.Module, layers: nn.ModuleList) -> None:
        if self.spec.world_size == 1 and self._plain_params:
            # A world of one has nothing to shard: FSDP2 would only copy every layer's
            # parameters in and out around each forward and backward (a third of the tiny
            # recipe's --local update). The state-dict and checkpoint APIs take plain modules.
            return
        mesh = init_device_mesh(self.device.type, (self.spec.world_size,))
        mp = (
            MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            if self.options.mixed_precision == "bf16"
            else MixedPrecisionPolicy()
        )
        offload = CPUOffloadPolicy() if self._offloads else OffloadPolicy()
        kwargs: dict[str, Any] = {"mesh": mesh, "mp_policy": mp, "offload_policy": offload}
        for layer in layers if self._shards_per_layer(model) else ():
            fully_shard(layer, reshard_after_forward=self.options.reshard_after_forward, **kwargs)
        fully_shard(model, reshard_after_forward=self.options.reshard_after_forward, **kwargs)
        # Sum (not average) gradients over ranks: losses are globally normalised already.
        # Forcing plain SUM collectives avoids PREMUL_SUM, which gloo does not support.
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.set_gradient_divide_factor(1.0)
                module.set_force_sum_reduction_for_comms(True)

    @property
    def _offloads(self) -> bool:
        return self.options.cpu_offload and self.device.type == "cuda"  # GPU only (options.py)

    @property
    def _plain_params(self) -> bool:
        """Parameters kept as they are, in the module's own dtype on its device: no mixed-
        precision casts, no offload (what the plain-module and fast-export paths need)."""
        return self.options.mixed_precision == "none" and not self._offloads

    def _shards_per_layer(self, model: nn.Module) -> bool:
        if self.options.shard_layers is not None:
            return self.options.shard_layers
        size = sum(p.numel() * p.element_size() for p in model.parameters())
        return size > WHOLE_MODEL_UNIT_BYTES

    def _require_model(self) -> nn.Module:
        if self.model is None:
            raise RuntimeError(f"{self.spec.role} engine used before init(): call init() first")
        return self.model

    # ------------------------------------------------------------------ forward
    def _policy_forward(
        self, mb: ModelBatch, temperature: float, with_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(log_probs [b, R], entropy [b, R] | None)`` of ``mb``, zero on padding."""
        model = self._require_model()
        if self.options.packing:
            pk = pack(mb).to(self.device)
            logits = model(
                input_ids=pk.input_ids,
                position_ids=pk.position_ids,  # restarting per sample (rotary positions)
                cu_seq_lens_q=pk.bounds,  # per-sample attention (varlen_attention.py)
                use_cache=False,
                logits_to_keep=pk.logit_index,
            ).logits  # [1, N, V]: only the logits that predict a response token
            lp, ent = token_log_probs(logits, pk.targets[None], temperature, with_entropy)
            return pk.scatter(lp[0]), (pk.scatter(ent[0]) if ent is not None else None)
        width = mb.response_width
        mb = mb.trim_prompt_padding()
        if self._by_tokens:  # a micro-batch of short samples runs at its own width
            mb = mb.trim_response_padding()
        mb = mb.to(self.device)
        groups = prompt_groups(mb) if self._shares_prompts(model) else None
        sharded = self.spec.world_size > 1
        if groups is None and sharded and self._shares_prompts(model):
            groups = every_row_alone(mb)  # every rank makes the same calls (FSDP collectives)
        if groups is not None:  # each distinct prompt runs once (shared_prompt.py)
            logits = shared_prompt_logits(model, mb, groups, two_calls=sharded)  # [b, R, V]
        else:
            # logits_to_keep = R + 1 keeps the last R + 1 positions: columns P-1 .. L-1; the
            # one at L-1 predicts past the end and is dropped. Row-aligned because responses
            # are right-padded after a left-padded prompt (see rlctl.engines.train.batch).
            logits = model(
                input_ids=mb.input_ids,
                attention_mask=mb.attention_mask,
                position_ids=mb.position_ids,
                use_cache=False,
                logits_to_keep=mb.response_width + 1,
            ).logits[:, :-1]  # [b, R, V]
        log_probs, entropy = token_log_probs(logits, mb.responses, temperature, with_entropy)
        mask = mb.response_mask
        return (_pad_columns(log_probs * mask, width),
                _pad_columns(entropy * mask, width) if entropy is not None else None)

    def _shares_prompts(self, model: nn.Module) -> bool:
        # transformers drops the KV cache of a checkpointed layer while training
        # transformers 5 renamed the flag (the old name warns, and goes in v6)
        flag = ("is_activation_checkpointing" if hasattr(type(model), "is_activation_checkpointing")
                else "is_gradient_checkpointing")
        checkpointed = model.training and bool(getattr(model, flag, False))
        return self.options.share_prompts and not checkpointed

    def _value_forward(self, mb: ModelBatch) -> torch.Tensor:
        model = self._require_model()
        if self.options.packing:
            pk = pack(mb).to(self.device)
            values = model(pk.input_ids, None, pk.position_ids, cu_seq_lens_q=pk.bounds)  # [1, T]
            return pk.scatter(values[0, pk.logit_index])  # [b, R]
        width = mb.response_width
        mb = mb.trim_prompt_padding()
        if self._by_tokens:
            mb = mb.trim_response_padding()
        mb = mb.to(self.device)
        values = model(mb.input_ids, mb.attention_mask, mb.position_ids)  # [b, L]
        # The value of the state before response token t sits at column P - 1 + t.
        return _pad_columns(values[:, -mb.response_width - 1 : -1] * mb.response_mask, width)

    @property
    def _by_tokens(self) -> bool:
        return (self.options.max_tokens_per_micro_batch is not None
                or self.options.log_prob_max_tokens_per_micro_batch is not None)

    def _plan(
        self, batch: ModelBatch, rows: int, tokens: int | None
    ) -> tuple[list[slice | torch.Tensor], int]:
        """This rank's micro-batches (row slices of ``rows``, or index groups within a
        ``tokens`` budget: rlctl.engines.train.packing) and the passes every rank runs (the
        max over ranks: FSDP's collectives must line up)."""
        if batch.batch_size == 0:
            raise ValueError(f"{self.spec.role} rank {self.spec.rank} got an empty batch")
        chunks: list[slice | torch.Tensor]
        if tokens is None:
            chunks = [slice(s, s + rows) for s in range(0, batch.batch_size, rows)]
        else:
            prompts, responses = sample_lengths(batch)
            chunks = list(token_budget_groups(prompts, responses, tokens,
                                              packed=self.options.packing))
        return chunks, all_reduce_max_int(len(chunks), self._comm_device)

    def _log_prob_plan(self, batch: ModelBatch) -> tuple[list[slice | torch.Tensor], int]:
        opts = self.options
        tokens = opts.log_prob_max_tokens_per_micro_batch or opts.max_tokens_per_micro_batch
        return self._plan(batch, self.spec.log_prob_micro_batch_size, tokens)

    @property
    def _comm_device(self) -> str:
        return "cpu" if self.device.type == "cpu" else str(self.device)

    @torch.no_grad()
    def compute_log_prob(
        self, batch: ModelBatch, *, temperature: float, with_entropy: bool = False,
        adapters: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(log_probs [B, R], entropy [B, R] | None)``, zero on padding, no grad;
        ``adapters=False``: of the base model (LoRA adapters off: the KL reference)."""
        if self.spec.role == "critic":
            raise RuntimeError("compute_log_prob on a critic engine: use compute_values")
        self._require_model().eval()
        if adapters:
            return self._log_probs(batch, temperature, with_entropy)
        if self.peft is None:
            raise RuntimeError(f"adapters=False on the {self.spec.role} engine, which has no "
                               "LoRA adapters (spec.lora is None)")
        from rlctl.models.lora import adapters_off

        with adapters_off(self.peft):
            return self._log_probs(batch, temperature, with_entropy)

    def _log_probs(self, batch: ModelBatch, temperature: float,
                   with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        chunks, passes = self._log_prob_plan(batch)
        shape = (batch.batch_size, batch.response_width)
        log_probs = torch.zeros(shape)
        entropy = torch.zeros(shape) if with_entropy else None
        for i in range(passes):
            rows = chunks[min(i, len(chunks) - 1)]
            lp, ent = self._policy_forward(batch.slice(rows), temperature, with_entropy)
            if i < len(chunks):  # extra passes only keep the collectives aligned
                log_probs[rows] = lp.cpu()
                if entropy is not None and ent is not None:
                    entropy[rows] = ent.cpu()
        return log_probs, entropy

    @torch.no_grad()
    def compute_values(self, batch: ModelBatch) -> torch.Tensor:
        """``values [B, R]``, zero on padding, no grad (critic only)."""
        if self.spec.role != "critic":
            raise RuntimeError(f"compute_values on a {self.spec.role} engine: use a critic")
        self._require_model().eval()
        chunks, passes = self._log_prob_plan(batch)
        values = torch.zeros(batch.batch_size, batch.response_width)
        for i in range(passes):
            rows = chunks[min(i, len(chunks) - 1)]
            v = self._value_forward(batch.slice(rows))
            if i < len(chunks):
                values[rows] = v.cpu()
        return values

    # ------------------------------------------------------------------ update
    def train_minibatch(
        self,
        batch: ModelBatch,
        fields: Mapping[str, torch.Tensor],
        loss_fn: LossFn,
        *,
        temperature: float = 1.0,
    ) -> dict[str, Any]:
        """One optimizer step; gradients summed over micro-batches and ranks.

        ``fields`` are per-sample tensors ([B] or [B, R]) sliced with the batch. Returns
        ``loss_fn``'s metrics reduced over micro-batches (this rank's; scalars averaged, token
        statistics merged: :mod:`rlctl.engines.train.metrics`), ``loss`` (the global
        minibatch loss: summed over micro-batches and ranks), ``grad_norm`` and ``lr`` (the
        learning rate this step used).
        """
        model = self._require_model()
        if self.optimizer is None or self.scheduler is None:
            raise RuntimeError(f"train_minibatch on a {self.spec.role} engine (no optimizer)")
        for key, value in fields.items():
            if value.shape[0] != batch.batch_size:
                raise ValueError(
                    f"field {key!r} has {value.shape[0]} rows but the batch has "
                    f"{batch.batch_size}: fields must be per-sample and in batch order"
                )
        model.train()
        chunks, passes = self._plan(batch, self.spec.micro_batch_size,
                                    self.options.max_tokens_per_micro_batch)
        want_entropy_grad = self.spec.entropy_in_loss
        reported: list[Mapping[str, Any]] = []
        local_loss = 0.0
        for i in range(passes):
            real = i < len(chunks)
            rows = chunks[min(i, len(chunks) - 1)]
            mb = batch.slice(rows)
            fields_mb = {k: v[rows].to(self.device) for k, v in fields.items()}
            outputs = self._train_outputs(mb, temperature, want_entropy_grad)
            loss, metrics = loss_fn(outputs, fields_mb)
            if not real:
                loss = loss * 0.0  # a pass for collective alignment only: no gradient
            loss.backward()
            if real:
                local_loss += float(loss.detach())
                reported.append(metrics)
        result: dict[str, Any] = reduce_micro_batches(reported)
        result["loss"] = all_reduce_sum(local_loss, self._comm_device)
        result.update(self._optimizer_step())
        return result

    def _train_outputs(
        self, mb: ModelBatch, temperature: float, want_entropy_grad: bool
    ) -> dict[str, torch.Tensor]:
        if self.spec.role == "critic":
            return {"values": self._value_forward(mb)}
        log_probs, entropy = self._policy_forward(mb, temperature, with_entropy=True)
        assert entropy is not None
        entropy = entropy if want_entropy_grad else entropy.detach()
        return {"log_probs": log_probs, "entropy": entropy}

    def _optimizer_step(self) -> dict[str, float]:
        assert self.model is not None and self.optimizer is not None and self.scheduler is not None
        clip = self.spec.optimizer.grad_clip if self.spec.optimizer is not None else None
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.spec.world_size > 1:
            grad_norm = clip_sharded_grads(params, clip, self._comm_device)
        else:
            norm = torch.nn.utils.clip_grad_norm_(params, max_norm=clip if clip else math.inf,
                                                  foreach=True)
            grad_norm = float(norm)
        lr = float(self.scheduler.get_last_lr()[0])
        if math.isfinite(grad_norm):
            self.optimizer.step()
        # A non-finite norm skips the update (the step still advances the schedule).
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"grad_norm": grad_norm, "lr": lr}

    # ------------------------------------------------------------------ weights
    def export_weights(self) -> dict[str, torch.Tensor]:
        """Full unsharded CPU weights with HF names, on rank 0; ``{}`` on other ranks; with
        LoRA, the adapters merged in. Every rank must call it (it gathers shards)."""
        state = self._full_state()
        if self.spec.lora is None or not state:
            return state
        from rlctl.models.lora import merged_state

        return merged_state(state, self.spec.lora.alpha / self.spec.lora.rank)

    def export_adapter(self) -> AdapterWeights | None:
        """The LoRA adapters (:class:`~rlctl.models.lora.AdapterWeights`: PEFT's names and
        config) on rank 0, ``None`` on the others; one all-gather of the adapters alone.
        Every rank must call it."""
        if self.peft is None:
            raise RuntimeError(f"export_adapter on the {self.spec.role} engine, which has no "
                               "LoRA adapters (spec.lora is None)")
        from rlctl.models.lora import AdapterWeights, adapter_state, config_dict

        model = self._require_model()
        if self._plain_params:
            state = gathered_trainable(model, rank=self.spec.rank, world=self.spec.world_size,
                                       device=self._comm_device)
        else:  # mixed precision / offload: DCP's gather of the trainable parameters
            options = StateDictOptions(full_state_dict=True, cpu_offload=True,
                                       ignore_frozen_params=True)
            state = {k: v.clone() for k, v in
                     get_model_state_dict(model, options=options).items()}
        if not state:
            return None
        return AdapterWeights(adapter_state(self.peft, state), config_dict(self.peft))

    def _full_state(self) -> dict[str, torch.Tensor]:
        model = self._require_model()
        if self.spec.world_size > 1 and self._plain_params:
            # one all-gather per FSDP unit, not one per parameter (full_weights.py)
            return gathered_state_dict(model, keep=self.spec.rank == 0)
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_model_state_dict(model, options=options)
        # With one CPU rank the "gathered" tensors can alias the live parameters; the next
        # optimizer step would then change an export already handed out. Copy those.
        live = {p.to_local().untyped_storage().data_ptr() if hasattr(p, "to_local")
                else p.untyped_storage().data_ptr() for p in model.parameters()}
        return {
            k: v.detach().clone() if v.untyped_storage().data_ptr() in live else v
            for k, v in state.items()
        }

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Load full weights given on rank 0 (other ranks pass ``{}``)."""
        options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
        set_model_state_dict(self._require_model(), dict(state_dict), options=options)

    def _checkpoint_state(self) -> dict[str, Any]:
        model = self._require_model()
        weights = get_model_state_dict(model)
        if self.peft is not None:  # LoRA: the trained parameters only (the base is the recipe's)
            # (by name: DCP's ignore_frozen_params keeps a tied head, measured)
            trained = {n for n, p in model.named_parameters() if p.requires_grad}
            weights = {k: v for k, v in weights.items() if k in trained}
        state: dict[str, Any] = {"model": weights}
        if self.optimizer is not None and self.scheduler is not None:
            state["optimizer"] = get_optimizer_state_dict(model, self.optimizer)
            state["scheduler"] = self.scheduler.state_dict()
        return state

    def save(self, path: str) -> None:
        """Sharded checkpoint (model, optimizer, scheduler) with torch.distributed.checkpoint."""
        safe_dcp.save(self._checkpoint_state(), path)  # errors as CheckpointError, one line

    def load(self, path: str) -> None:
        """Restore a checkpoint written by :meth:`save` (same role; any world size)."""
        state = self._checkpoint_state()
        safe_dcp.load(state, path)  # never dcp.load: it unpickles the checkpoint unrestricted
        model = self._require_model()
        # strict=False lets the frozen base weights (absent) be; the loaded keys are exactly the
        # trained ones: DCP filled every key of the template above
        set_model_state_dict(model, state["model"],
                             options=StateDictOptions(strict=self.peft is None))
        if self.optimizer is not None and self.scheduler is not None:
            set_optimizer_state_dict(model, self.optimizer, state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])

    def close(self) -> None:
        """Drop the model; the process group stays (other engines in this process share it)."""
        self.model = self.optimizer = self.scheduler = self.peft = None


def _pad_columns(values: torch.Tensor, width: int) -> torch.Tensor:
    """``[b, R']`` -> ``[b, width]`` with zero columns on the right (keeps the gradient)."""
    missing = width - values.shape[1]
    return values if missing == 0 else torch.nn.functional.pad(values, (0, missing))
