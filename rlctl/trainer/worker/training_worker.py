"""A training rank: hosts the actor, reference and/or critic engines of one process.

Every method receives a :class:`KVBatchMeta` (its shard of the step), fetches from the data
plane only the fields it needs, runs the engine, writes its outputs back and returns scalar
metric partials. Shards are padded to ``pad_to`` rows (copies with a zero mask) so every
FSDP rank runs the same number of micro-batches: collectives must line up.

Model parallelism (Megatron TP / PP): the ranks of one data-parallel group get the same shard
(the controller splits by :meth:`TrainingWorker.layout`'s ``dp_rank``) and only the one whose
engine ``writes_outputs`` puts results and returns metric partials; pure data-parallel engines
report ``dp_rank == rank`` (every rank is its own DP group and writes).

Plugin options were validated when the recipe was loaded (:class:`LoadedRecipe`); the engine
gets its own through its spec, the estimator and the policy loss theirs as keywords. The step's
shape (which roles, where the old log-probs and the advantages come from, the temperature, the
correction) is the run's :class:`~rlctl.trainer.plan.StepPlan`, given once at construction.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

from rlctl.config.loaded import LoadedRecipe
from rlctl.config.placement import Placed
from rlctl.protocol.kv import KVBatchMeta
from rlctl.protocol.refs import LocalRef
from rlctl.trainer import metric_reduce as mr
from rlctl.trainer.plan import StepPlan
from rlctl.trainer.worker.contract import Worker
from rlctl.trainer.worker.fields import (
    flat,
    generated_lengths,
    loss_mask_of,
    mask_from_lengths,
    to_jagged,
    to_padded,
)

if TYPE_CHECKING:
    from rlctl.engines.train.contract import LoRAModelEngine, ModelEngine


class TrainingWorker(Worker):
    """One rank of the training engines (the plan's roles: actor [, ref] [, critic])."""

    joins_process_group: ClassVar[bool] = True  # its ranks are one torch.distributed world

    def __init__(
        self,
        loaded: LoadedRecipe,
        plane: Any,
        plan: StepPlan,
        rank: int = 0,
        world_size: int = 1,
        master_port: int = 0,
        placed: Placed | None = None,
    ) -> None:
        self.loaded = loaded
        self.recipe = loaded.recipe
        self.plane = plane
        self.plan = plan
        self.rank = rank
        self.world_size = world_size
        self.master_port = master_port
        self.placed = placed
        self.engines: dict[str, ModelEngine] = {}

    def rendezvous_port(self) -> int:
        """Rank 0 of a multi-process world: the port its rendezvous store will listen on (at
        :attr:`rendezvous_host`: loopback, or rank 0's node address when the ranks span
        nodes), bound now and held until :meth:`ready`
        (:func:`rlctl.engines.rendezvous.hold_listener`). The worker group hands it to every
        rank's :meth:`ready`."""
        from rlctl.engines.rendezvous import hold_listener

        return hold_listener(self.rendezvous_host)

    def ready(self, master_port: int | None = None) -> bool:
        """Build the engines (joining the ranks' process group); ``master_port``: rank 0's
        :meth:`rendezvous_port`, else the one given at construction."""
        from rlctl.engines.rendezvous import collectives_on, is_loopback
        from rlctl.engines.train.contract import ModelEngineSpec
        from rlctl.models.loading import load_tokenizer
        from rlctl.registry import get_registry
        from rlctl.trainer.worker.actor_loss import ActorLoss, build_critic_loss
        from rlctl.trainer.worker.device import pick_device

        if master_port is not None:
            self.master_port = master_port
        self.take_seat()
        if self.placed is not None and not is_loopback(self.rendezvous_host):
            collectives_on(self.placed.node_address)  # the ranks span nodes
        # One process per rank; it sees only its seat's devices (cuda:0 is its own).
        os.environ.update(
            MASTER_ADDR=self.rendezvous_host,
            MASTER_PORT=str(self.master_port),
            RANK=str(self.rank),
            WORLD_SIZE=str(self.world_size),
            LOCAL_RANK="0",
        )
        # Collectives wait a minute longer than the controller: when a peer stops, the
        # controller's phase bound names it before the survivors' collectives time out and
        # blame themselves.
        dist_timeout_s = self.recipe.schedule.phase_timeout_s + 60
        os.environ.setdefault("RLCTL_DIST_TIMEOUT_S", str(dist_timeout_s))
        self.registry = get_registry()
        tokenizer = load_tokenizer(self.recipe.model)
        self.pad_id = int(
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        engine_cls = self.registry.load("model_engine", self.recipe.engines.train.backend)
        device = pick_device(self.recipe)
        for role in self.plan.roles:
            engine = engine_cls(ModelEngineSpec.from_loaded(
                self.loaded, role, rank=self.rank, world_size=self.world_size, device=device))
            engine.init()
            self.engines[role] = engine
        alg, horizon = self.recipe.algorithm, self.recipe.rollout.max_new_tokens
        # Built once: per call only the minibatch's normaliser and the KL coefficient change.
        self.actor_loss = ActorLoss(
            self.plan, alg, self.registry, horizon=horizon,
            options=self.loaded.option_kwargs("algorithm.loss.options"))
        if "critic" in self.engines:
            self.critic_loss = build_critic_loss(alg, self.recipe.critic.cliprange_value,
                                                 horizon)
        first = next(iter(self.engines.values()))
        self.dp_rank, self.dp_size = first.dp_rank, first.dp_size
        self.writes_outputs = first.writes_outputs
        from rlctl.trainer.startup_heap import freeze_startup_heap

        freeze_startup_heap()  # the engines are built: see startup_heap.py
        return True

    def layout(self) -> tuple[int, int, bool]:
        """``(dp_rank, dp_size, writes_outputs)`` of this rank (after :meth:`ready`)."""
        return self.dp_rank, self.dp_size, self.writes_outputs

    # ------------------------------------------------------------------ helpers
    def _model_batch(
        self, meta: KVBatchMeta, extra_fields: list[str], pad_to: int,
        raw_fields: Sequence[str] = (),
    ) -> tuple[Any, dict[str, Any], list[int], Any]:
        """Fetch token ids (+ extra per-token fields) and build a padded ModelBatch.

        Returns (batch, {field: [B', R]}, response lengths, the fetched rows); B' = pad_to >=
        len(meta). ``raw_fields`` join the same read and stay as fetched (``len(meta)`` rows).
        """
        from rlctl.engines.train.batch import ModelBatch

        keys = list(meta.keys)
        lengths = [int(x) for x in meta.tag_values("response_len")]
        pad = max(pad_to - len(keys), 0)
        wanted = ["prompt_ids", "response_ids", "loss_mask", *extra_fields]
        td = self.plane.kv_batch_get(keys, meta.partition_id,
                                     list(dict.fromkeys([*wanted, *raw_fields])))
        # Copies of the last sample (their mask zeroed below) keep shapes realistic.
        batch = ModelBatch.from_values(*_with_copies(*flat(td["prompt_ids"]), pad),
                                       *_with_copies(*flat(td["response_ids"]), pad),
                                       pad_id=self.pad_id)
        fields = {name: _pad_rows(to_padded(td[name], lengths).float(), pad)
                  for name in extra_fields}
        # [B', R]: real response tokens that the policy generated (observations are 0)
        width = batch.responses.shape[1]
        mask = mask_from_lengths(lengths, width) * loss_mask_of(td, lengths, width)
        mask = _pad_rows(mask, pad, zero=True)
        fields["response_mask"] = mask
        batch.response_mask = mask * batch.response_mask  # padded copies contribute nothing
        return batch, fields, lengths, td

    def _put(self, meta: KVBatchMeta, lengths: list[int], outputs: dict[str, Any]) -> None:
        from tensordict import TensorDict

        n = len(meta)
        td = TensorDict({k: to_jagged(v[:n], lengths) for k, v in outputs.items()}, batch_size=[n])
        self.plane.kv_batch_put(list(meta.keys), meta.partition_id, td)

    # ------------------------------------------------------------------ phases
    def compute_log_prob(
        self, meta: KVBatchMeta, role: str, field: str, pad_to: int
    ) -> dict[str, mr.Partial]:
        """Old (actor) or reference log-probs of the sampled responses -> ``field``.

        No entropy here: the update's own forward computes it anyway (``actor/entropy``
        comes from there, see actor_loss.py), so this pass skips the vocabulary-wide sum.
        The actor's pass measures the rollout-vs-trainer gap (the plan's ``probs_gap``).
        """
        from rlctl.trainer.worker.actor_loss import rollout_probs_gap

        extra = ["rollout_log_probs"] if role == "actor" else []
        batch, fields, lengths, _ = self._model_batch(meta, extra, pad_to)
        if role == "ref" and self.plan.reference.value == "base":
            # the reference for free: the actor's module with its LoRA adapters off
            log_probs, _ = self._lora_actor().compute_log_prob(
                batch, temperature=self.plan.temperature, with_entropy=False, adapters=False)
        else:
            log_probs, _ = self.engines[role].compute_log_prob(
                batch, temperature=self.plan.temperature, with_entropy=False)
        if len(meta) == 0 or not self.writes_outputs:
            return {}
        self._put(meta, lengths, {field: log_probs})
        if "rollout_log_probs" not in fields:
            return {}
        n = len(meta)
        return {"training/rollout_probs_diff": rollout_probs_gap(
            log_probs[:n], fields["rollout_log_probs"][:n], fields["response_mask"][:n])}

    def compute_values(self, meta: KVBatchMeta, pad_to: int) -> dict[str, mr.Partial]:
        batch, _, lengths, _ = self._model_batch(meta, [], pad_to)
        values = self.engines["critic"].compute_values(batch)
        if len(meta) and self.writes_outputs:
            self._put(meta, lengths, {"values": values})
        return {}

    def compute_advantage(self, meta: KVBatchMeta, kl_coef: float) -> dict[str, mr.Partial]:
        """The advantage phase on this rank's group-whole shard (the plan's ``phase``)."""
        from rlctl.trainer.worker.advantage_phase import run_advantage_phase

        return run_advantage_phase(
            self.plane, meta, self.recipe, self.registry, kl_coef=kl_coef,
            options=self.loaded.option_kwargs("algorithm.estimator_options"),
        )

    def update_actor(
        self, meta: KVBatchMeta, pad_to: int, kl_coef: float, step: int
    ) -> dict[str, mr.Partial]:
        """The actor's epochs x minibatches of optimizer steps over this rank's shard.

        Where the plan says so, the old log-probs are this update's own detached log-probs
        (it then reports the rollout-vs-trainer gap), and the advantages come from this
        call's own read of its group-whole shard, computed as the advantage phase computes
        them (they reach the data plane only for the rollout dump, the one other reader)."""
        from rlctl.trainer.worker.advantage_phase import advantage_inputs

        plan = self.plan
        needed = ["old_log_probs"] if plan.old_log_prob_pass else []
        if plan.advantage_phase:
            needed.append("advantages")
        if plan.kl.value == "loss":
            needed.append("ref_log_probs")
        if plan.reads_rollout_log_probs:
            needed.append("rollout_log_probs")
        masked = None
        if self.recipe.algorithm.overlong.filter:
            # DAPO's overlong filtering: a truncated response adds no loss and no tokens
            masked = [f == "length" for f in meta.tag_values("finish_reason")]
        raw = [] if plan.advantage_phase else advantage_inputs(self.recipe, self.registry)
        batch, fields, lengths, td = self._model_batch(meta, needed, pad_to, raw_fields=raw)
        partials: dict[str, mr.Partial] = {}
        if not plan.advantage_phase and len(meta):
            partials = self._advantages_into(fields, meta, lengths, td, kl_coef)

        def loss_fn(outputs: dict[str, Any], micro: dict[str, Any], normalizer: float) -> Any:
            return self.actor_loss(outputs, micro, normalizer=normalizer, kl_coef=kl_coef)

        updated = self._update("actor", batch, fields, loss_fn, step, masked=masked)
        return mr.merge([partials, updated]) if self.writes_outputs else {}

    def _advantages_into(self, fields: dict[str, Any], meta: KVBatchMeta, lengths: list[int],
                         td: Any, kl_coef: float) -> dict[str, mr.Partial]:
        """The advantage phase inside the update: ``fields["advantages"]`` [B', R] from the
        rows ``td`` just read; returns the phase's metric partials."""
        from rlctl.trainer.worker.advantage_phase import compute_advantages

        outputs, partials = compute_advantages(
            self.plane, meta, td, self.recipe, self.registry, kl_coef=kl_coef,
            options=self.loaded.option_kwargs("algorithm.estimator_options"))
        rows = fields["response_mask"].shape[0]
        fields["advantages"] = _pad_rows(outputs["advantages"].float(), rows - len(meta))
        if self.recipe.logging.rollout_dump_samples and self.writes_outputs:
            self._put(meta, lengths, {k: v.float() for k, v in outputs.items()})
        return partials

    def update_critic(self, meta: KVBatchMeta, pad_to: int, step: int) -> dict[str, mr.Partial]:
        needed = ["values", "returns"]
        batch, fields, _, _ = self._model_batch(meta, needed, pad_to)
        def loss_fn(outputs: dict[str, Any], micro: dict[str, Any], normalizer: float) -> Any:
            return self.critic_loss(outputs, micro, normalizer=normalizer)

        updated = self._update("critic", batch, fields, loss_fn, step)
        return updated if self.writes_outputs else {}

    def _update(self, role: str, batch: Any, fields: dict[str, Any], loss_fn: Any, step: int,
                masked: list[bool] | None = None) -> dict[str, mr.Partial]:
        """Epochs x minibatches of optimizer steps over this rank's shard (``batch`` and its
        ``fields``, padded to the same rows on every rank); ``masked`` rows (one flag per
        real sample) are left out of the loss."""
        import torch

        alg = self.recipe.algorithm
        if masked is not None and any(masked):
            rows_out = torch.zeros(batch.responses.shape[0], dtype=torch.bool)  # [B']
            rows_out[: len(masked)] = torch.as_tensor(masked)
            fields["response_mask"][rows_out] = 0.0
            batch.response_mask[rows_out] = 0.0
        engine = self.engines[role]
        rows = batch.responses.shape[0]
        per_mb = max(rows // alg.minibatches, 1)
        partials: dict[str, mr.Partial] = {}
        for epoch in range(alg.epochs):
            order = torch.arange(rows)
            if alg.shuffle_minibatches and (alg.minibatches > 1 or alg.epochs > 1):
                # Seeded by the DP rank: model-parallel peers of one shard must shuffle alike.
                gen = torch.Generator().manual_seed(
                    self.recipe.run.seed * 100003 + step * 101 + epoch * 7 + self.dp_rank
                )
                order = torch.randperm(rows, generator=gen)
            for mb in range(alg.minibatches):
                idx = (
                    order[mb * per_mb : (mb + 1) * per_mb]
                    if mb < alg.minibatches - 1
                    else order[mb * per_mb :]
                )
                mb_batch = batch.slice(idx)
                mb_fields = {k: v[idx] for k, v in fields.items()}
                normaliser = self._global_normaliser(mb_fields["response_mask"])

                def wrapped(outputs: dict[str, Any], micro: dict[str, Any], _n=normaliser) -> Any:
                    return loss_fn(outputs, micro, _n)

                metrics = engine.train_minibatch(
                    mb_batch, mb_fields, wrapped, temperature=self.plan.temperature)
                weight = float(mb_fields["response_mask"].sum())
                for name, value in metrics.items():
                    key = name if "/" in name else f"{role}/{name}"
                    if isinstance(value, tuple):  # a token statistic: exact over all tokens
                        if epoch == 0:  # of the policy as it first saw this step's samples
                            partials = mr.merge([partials, {key: value}])
                        continue
                    partials = mr.merge(
                        [partials, {key: mr.scalar_partial(float(value), max(weight, 1.0))}]
                    )
        return partials

    def _global_normaliser(self, mask: Any) -> float:
        """Tokens (token-mean) or sequences (seq-mean-*) of the minibatch over all ranks."""
        from rlctl.algorithms.aggregation import loss_normalizer
        from rlctl.engines.distributed import all_reduce_sum, group_device

        local = loss_normalizer(mask, self.recipe.algorithm.loss.agg)
        # Summed over every rank (the default group: on the device its backend reduces on),
        # then divided by the ranks per DP group: model-parallel peers hold copies of the same
        # shard (exact, since their shards are identical).
        total = all_reduce_sum(local, group_device()) * self.dp_size / self.world_size
        return max(total, 1.0)

    def score_partials(self, meta: KVBatchMeta) -> dict[str, mr.Partial]:
        """Score and per-reward partials of ``meta`` (validation: no advantages needed)."""
        if len(meta) == 0:
            return {}
        from rlctl.algorithms.accuracy import accuracy_partials, group_scores
        from rlctl.trainer.worker.reward_sections import reward_fields
        from rlctl.trainer.worker.sessions import component_partials

        names = ["score"] + reward_fields(self.recipe, self.registry)
        td = self.plane.kv_batch_get(list(meta.keys), meta.partition_id, names)
        partials = {
            ("critic/score" if n == "score" else n): mr.partial_of(
                td[n].float().reshape(-1).tolist()
            )
            for n in names
        }
        partials["response_length"] = mr.partial_of(generated_lengths(meta))
        partials.update(component_partials(meta))
        # the shard holds whole groups (group_shards): pass@k needs each prompt's responses
        groups = group_scores(meta.tag_values("uid"), td["score"].float().reshape(-1).tolist())
        partials.update(accuracy_partials(
            groups, correct_score=self.recipe.rollout.val_correct_score,
            greedy=self.recipe.rollout.val_temperature == 0))
        return partials

    # ------------------------------------------------------------------ weights & state
    def export_weights(self, as_object_ref: bool = False) -> Any:
        """What the plan's weight sync moves, by reference, ``[ref]`` (rank 0; other ranks
        join the gather and get None): the full policy weights (the LoRA adapters merged in),
        or the adapters alone (:class:`~rlctl.models.lora.AdapterWeights`); a Ray ObjectRef,
        or in one process a LocalRef (rlctl.protocol.refs)."""
        state = (self._lora_actor().export_adapter() if self.plan.weights.value == "adapter"
                 else self.engines["actor"].export_weights())
        if not state:
            return None
        if as_object_ref:
            import ray

            return [ray.put(state)]  # a list, so Ray hands the ref itself to the next actor
        return [LocalRef(state)]

    def _lora_actor(self) -> LoRAModelEngine:
        """The actor as a LoRA engine: the recipe check admits LoRA only on engines registered
        with ``lora=True``, which implement it."""
        return cast("LoRAModelEngine", self.engines["actor"])

    def save(self, path: str) -> None:
        """Every rank writes its shards of every trainable role (and the frozen ref: no)."""
        for role, engine in self.engines.items():
            if role != "ref":  # the reference is the initial policy: rebuilt from the recipe
                engine.save(os.path.join(path, role))

    def load(self, path: str) -> None:
        for role, engine in self.engines.items():
            if role != "ref":
                engine.load(os.path.join(path, role))

    def export_hf(self, out_dir: str) -> str | None:
        """Write the policy as an HF checkpoint (safetensors) from rank 0; all ranks gather."""
        state = self.engines["actor"].export_weights()
        if not state:
            return None
        from rlctl.checkpoint import export_hf
        from rlctl.models.loading import load_tokenizer

        export_hf(state, self.engines["actor"].hf_config, load_tokenizer(self.recipe.model),
                  out_dir)
        return out_dir

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()


def _with_copies(values: Any, lengths: list[int], copies: int) -> tuple[Any, list[int]]:
    """Rows given back to back (``values [N]``, ``lengths``) plus ``copies`` of the last row."""
    if not copies:
        return values, lengths
    import torch

    last = values[len(values) - lengths[-1]:]
    return torch.cat([values, last.repeat(copies)]), lengths + [lengths[-1]] * copies


def _pad_rows(value: Any, copies: int, *, zero: bool = False) -> Any:
    """``value [B, ...]`` plus ``copies`` rows: the last row repeated, or zeros."""
    if not copies:
        return value
    import torch

    extra = torch.zeros_like(value[-1:]) if zero else value[-1:]
    return torch.cat([value, extra.expand(copies, *value.shape[1:])])
