"""Code that runs inside spawned ranks for the FSDP LoRA tests (imported by the children).

Each worker joins a gloo group on 127.0.0.1, builds a LoRA actor (and, on one rank, a
separately loaded base model as the reference to compare with), runs one update, exports
and checkpoints; rank 0 saves what the parent test compares with ``torch.save``.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import replace

import torch

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from tests.engines.train.fsdp import fsdp_workers as fw

LORA = {"rank": 4, "alpha": 8.0}


def recipe(**train) -> Recipe:  # type: ignore[no-untyped-def]
    data = fw.recipe(**train).model_dump(by_alias=True)
    data["model"]["lora"] = LORA
    data["algorithm"]["kl"] = {"in": "loss"}  # a KL to the reference: the base model
    data["critic"] = {"enabled": False}
    return Recipe.model_validate(data)


def _run(rank: int, world: int, port: int, out_path: str, scenario: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    from rlctl.engines.distributed import all_reduce_sum, group_device
    from rlctl.engines.train.contract import ModelEngineSpec
    from rlctl.engines.train.fsdp.engine import FSDPEngine

    full, adv = fw.fixed_batch()
    rows = fw.rows_of(rank, world, full.batch_size)
    batch = full.slice(rows)
    loaded = validate_recipe(recipe(options={"shard_layers": scenario == "per_layer"}))
    actor = FSDPEngine(ModelEngineSpec.from_loaded(loaded, "actor", rank=rank, world_size=world))
    actor.init()
    results: dict = {
        "trainable": sorted(n for n, p in actor.model.named_parameters() if p.requires_grad),
        "optimized": sum(p.numel() for g in actor.optimizer.param_groups for p in g["params"]),
        "before": actor.compute_log_prob(batch, temperature=0.7)[0],
    }
    fields = {"advantages": adv[rows], "response_mask": batch.response_mask}
    fields["normaliser"] = torch.full((batch.batch_size,),
                                      all_reduce_sum(batch.response_mask.sum(), group_device()))
    results["metrics"] = actor.train_minibatch(batch, fields, fw.policy_loss, temperature=0.7)
    results["after"] = actor.compute_log_prob(batch, temperature=0.7)[0]
    results["base"] = actor.compute_log_prob(batch, temperature=0.7, adapters=False)[0]
    results["merged"] = actor.export_weights()
    adapter = actor.export_adapter()
    results["adapter"] = None if adapter is None else (adapter.tensors, adapter.config)
    dcp = StateDictOptions(full_state_dict=True, cpu_offload=True, ignore_frozen_params=True)
    results["trainable_dcp"] = get_model_state_dict(actor.model, options=dcp)
    if world == 1:
        _one_rank(loaded, actor, batch, fields, out_path, results)
    if rank == 0:
        torch.save(results, out_path)


def _one_rank(loaded, actor, batch, fields, out_path, results) -> None:  # type: ignore[no-untyped-def]
    """World 1: the separately loaded reference, a checkpoint round trip, both syncs."""
    from rlctl.checkpoint import safe_dcp
    from rlctl.engines.train.contract import ModelEngineSpec
    from rlctl.engines.train.fsdp.engine import FSDPEngine

    ref = FSDPEngine(ModelEngineSpec.from_loaded(loaded, "ref"))
    ref.init()
    results["ref"] = ref.compute_log_prob(batch, temperature=0.7)[0]
    ckpt = os.path.join(os.path.dirname(out_path), "ckpt")
    actor.save(ckpt)
    results["ckpt_keys"] = sorted(safe_dcp.load_full(ckpt)["model"])
    saved = actor.compute_log_prob(batch, temperature=0.7)[0]
    first = actor.train_minibatch(batch, fields, fw.policy_loss, temperature=0.7)
    moved = actor.compute_log_prob(batch, temperature=0.7)[0]
    results["ckpt_moved"] = (moved - saved).abs().max()
    actor.load(ckpt)
    results["ckpt_restored"] = (actor.compute_log_prob(batch, temperature=0.7)[0]
                                - saved).abs().max()
    # the same update again from the restored state (weights, optimizer, schedule) lands
    # where the first one did
    again = actor.train_minibatch(batch, fields, fw.policy_loss, temperature=0.7)
    results["ckpt_update"] = (first["grad_norm"], again["grad_norm"])
    results["ckpt_update_lands"] = (actor.compute_log_prob(batch, temperature=0.7)[0]
                                    - moved).abs().max()
    results["rollout"] = {sync: _rollout_vs_engine(loaded.recipe, actor, sync)
                          for sync in ("adapter", "merged")}
    # gradient checkpointing with frozen embeddings: the adapters still get their gradient
    data = loaded.recipe.model_dump(by_alias=True)
    data["model"]["gradient_checkpointing"] = True
    checkpointed = FSDPEngine(ModelEngineSpec.from_loaded(
        validate_recipe(Recipe.model_validate(data)), "actor"))
    checkpointed.init()
    first_batch, adv = fw.fixed_batch()
    fields = {"advantages": adv, "response_mask": first_batch.response_mask,
              "normaliser": torch.full((first_batch.batch_size,),
                                       float(first_batch.response_mask.sum()))}
    results["checkpointed_grad_norm"] = checkpointed.train_minibatch(
        first_batch, fields, fw.policy_loss, temperature=0.7)["grad_norm"]


def _rollout_vs_engine(rec: Recipe, actor, sync: str) -> dict:  # type: ignore[no-untyped-def]
    """Sample with the hf engine at T=0.7 after a sync (adapters, or merged weights), twice
    (a second version replaces the first), and recompute the log-probs with the actor."""
    from rlctl.engines.rollout.contract import RolloutEngineSpec
    from rlctl.engines.rollout.hf.engine import HFRolloutEngine
    from rlctl.engines.rollout.weight_sync import InProcessWeightSync
    from rlctl.engines.train.batch import ModelBatch

    rollout = HFRolloutEngine(replace(RolloutEngineSpec.from_loaded(validate_recipe(rec)), seed=1))
    rollout.load()
    sync_once = InProcessWeightSync()
    prompts = [[1, 5, 6, 7, 14], [1, 9, 14], [1, 4, 4, 4, 4, 4, 14]] * 4
    out: dict = {}
    for version in (1, 2):
        if version == 2:  # move the actor on: the second sync must replace the first
            with torch.no_grad():
                for _, p in actor.model.named_parameters():
                    if p.requires_grad:
                        p.add_(0.05)
        sync_once(actor.export_adapter() if sync == "adapter" else actor.export_weights(),
                  rollout, version)
        gens = rollout.generate_batch(prompts, max_new_tokens=6, temperature=0.7, top_p=1.0,
                                      top_k=0, seed=11)
        mb = ModelBatch.from_samples(prompts, [g.token_ids for g in gens], fw.PAD)
        lp, _ = actor.compute_log_prob(mb, temperature=0.7)
        rollout_lp = torch.zeros_like(lp)
        for i, g in enumerate(gens):
            rollout_lp[i, : len(g.log_probs)] = torch.tensor(g.log_probs)
        out[version] = {"engine": lp, "rollout": rollout_lp, "mask": mb.response_mask,
                        "versions": {g.weight_version for g in gens}}
    return out


def worker(rank: int, world: int, port: int, out_path: str, scenario: str) -> None:
    ok = False
    try:
        _run(rank, world, port, out_path, scenario)
        ok = True
    except BaseException:
        traceback.print_exc()
        raise
    finally:
        from tests.engines.gloo_teardown import leave_process_group

        leave_process_group(ok=ok)
