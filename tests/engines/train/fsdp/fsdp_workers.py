"""Code that runs inside spawned ranks for the FSDP engine tests (imported by the children).

Each worker joins a gloo group on 127.0.0.1, runs one scenario and rank 0 saves its results
with ``torch.save`` for the parent test to compare.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import replace

import torch

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.train.batch import ModelBatch

PAD = 0


def recipe(**train) -> Recipe:
    return Recipe.model_validate({
        "run": {"seed": 3},
        "data": {"task": "count_digits"},  # a valid recipe needs prompts; engines read none
        "model": {"path": "tiny", "dtype": "float32"},
        # SGD: the update is lr * grad, so weights compare as tightly as gradients do. (Adam's
        # first step is lr * sign(g), which flips on float-noise-sized gradients.)
        "algorithm": {"optim": {"name": "sgd", "lr": 1e-1, "grad_clip": 1.0}},
        "critic": {"enabled": True, "lr": 1e-1},
        "engines": {"train": {"micro_batch_size": 4, "log_prob_micro_batch_size": 5, **train}},
    })


def fixed_batch(n: int = 16) -> tuple[ModelBatch, torch.Tensor]:
    """n samples with varied prompt/response lengths, plus one advantage per sample."""
    g = torch.Generator().manual_seed(7)
    prompts = [torch.randint(4, 14, (int(torch.randint(2, 8, (1,), generator=g)),), generator=g)
               for _ in range(n)]
    responses = [torch.randint(4, 30, (int(torch.randint(1, 5, (1,), generator=g)),), generator=g)
                 for _ in range(n)]
    adv = torch.randn(n, generator=g)
    return ModelBatch.from_samples(prompts, responses, PAD), adv


def rows_of(rank: int, world: int, n: int) -> slice:
    """Uneven split on purpose (11 + 5 of 16): ranks run different micro-batch counts."""
    if world == 1:
        return slice(0, n)
    cut = 11
    return slice(0, cut) if rank == 0 else slice(cut, n)


def policy_loss(out, f):
    # Token-sum / GLOBAL token count: REINFORCE-style surrogate plus a small entropy term.
    mask = f["response_mask"]
    per_token = -(out["log_probs"] * f["advantages"][:, None]) - 0.01 * out["entropy"]
    return (per_token * mask).sum() / f["normaliser"][0], {"tokens": mask.sum()}


def value_loss(out, f):
    mask = f["response_mask"]
    err = (out["values"] - f["returns"][:, None]) ** 2
    return (err * mask).sum() / f["normaliser"][0], {}


def _run(rank: int, world: int, port: int, out_path: str, scenario: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    from rlctl.engines.distributed import all_reduce_sum, group_device
    from rlctl.engines.train.contract import ModelEngineSpec
    from rlctl.engines.train.fsdp.engine import FSDPEngine

    results: dict = {}
    full, adv = fixed_batch()
    rows = rows_of(rank, world, full.batch_size)
    batch = full.slice(rows)
    # train_per_layer: what a large model gets (every decoder layer its own FSDP unit); the
    # tiny model on its own is one unit (shard_layers auto)
    rec = recipe(options={"shard_layers": True}) if scenario == "train_per_layer" else recipe()
    loaded = validate_recipe(rec)
    if scenario in ("train", "train_per_layer", "all"):
        actor = FSDPEngine(ModelEngineSpec.from_loaded(loaded, "actor", rank=rank,
            world_size=world))
        actor.init()  # joins the process group: the global normaliser needs it
        from torch.distributed.fsdp import FSDPModule

        results["fsdp_units"] = sum(isinstance(m, FSDPModule) for m in actor.model.modules())
        fields = {"advantages": adv[rows], "response_mask": batch.response_mask}
        fields["normaliser"] = torch.full((batch.batch_size,),
                                          all_reduce_sum(batch.response_mask.sum(), group_device()))
        lp, ent = actor.compute_log_prob(batch, temperature=0.7, with_entropy=True)
        results["log_probs"], results["entropy"] = lp, ent
        results["metrics"] = actor.train_minibatch(batch, fields, policy_loss, temperature=0.7)
        results["weights"] = actor.export_weights()
        # what the fast export (one all-gather per FSDP unit) must equal: DCP's full state dict
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full = StateDictOptions(full_state_dict=True, cpu_offload=True)
        results["weights_dcp"] = get_model_state_dict(actor.model, options=full)
        critic = FSDPEngine(ModelEngineSpec.from_loaded(loaded, "critic", rank=rank,
            world_size=world))
        critic.init()
        cfields = dict(fields, returns=adv[rows])
        results["values0"] = critic.compute_values(batch)
        results["critic_metrics"] = critic.train_minibatch(batch, cfields, value_loss)
        results["values1"] = critic.compute_values(batch)
        results["critic_weights"] = critic.export_weights()
        results["critic_weights_dcp"] = get_model_state_dict(critic.model, options=full)
    if scenario == "all":  # world 1 only: ref, checkpoint round trip, rollout consistency
        ref = FSDPEngine(ModelEngineSpec.from_loaded(loaded, "ref"))
        ref.init()
        results["ref_log_probs"], _ = ref.compute_log_prob(batch, temperature=0.7)
        ckpt = os.path.join(os.path.dirname(out_path), "ckpt")
        actor.save(ckpt)
        saved = actor.export_weights()
        actor.train_minibatch(batch, fields, policy_loss, temperature=0.7)
        moved = actor.export_weights()
        actor.load(ckpt)
        restored = actor.export_weights()
        results["ckpt_moved"] = max((moved[k] - saved[k]).abs().max().item() for k in saved)
        results["ckpt_restored"] = max((restored[k] - saved[k]).abs().max().item() for k in saved)
        lr_before = actor.train_minibatch(batch, fields, policy_loss, temperature=0.7)["lr"]
        results["ckpt_lr"] = lr_before
        results["rollout"] = _rollout_vs_engine(rec, actor)
    if rank == 0:
        torch.save(results, out_path)


def _rollout_vs_engine(rec: Recipe, actor) -> dict:
    """Sample with the HF engine at T=0.7 and recompute the log-probs with the FSDP actor."""
    from rlctl.engines.rollout.contract import RolloutEngineSpec
    from rlctl.engines.rollout.hf.engine import HFRolloutEngine
    from rlctl.engines.rollout.weight_sync import InProcessWeightSync

    rollout = HFRolloutEngine(replace(RolloutEngineSpec.from_loaded(validate_recipe(rec)), seed=1))
    rollout.load()
    InProcessWeightSync()(actor, rollout, 5)
    prompts = [[1, 5, 6, 7, 14], [1, 9, 14], [1, 4, 4, 4, 4, 4, 14]] * 4
    gens = rollout.generate_batch(prompts, max_new_tokens=6, temperature=0.7, top_p=1.0,
                                  top_k=0, seed=11)
    batch = ModelBatch.from_samples(prompts, [g.token_ids for g in gens], PAD)
    lp, _ = actor.compute_log_prob(batch, temperature=0.7)
    rollout_lp = torch.zeros_like(lp)
    for i, g in enumerate(gens):
        rollout_lp[i, : len(g.log_probs)] = torch.tensor(g.log_probs)
    return {"engine": lp, "rollout": rollout_lp, "mask": batch.response_mask,
            "versions": {g.weight_version for g in gens}}


def worker(rank: int, world: int, port: int, out_path: str, scenario: str) -> None:
    ok = False
    try:
        _run(rank, world, port, out_path, scenario)
        ok = True
    except BaseException:
        traceback.print_exc()
        raise
    finally:
        # Imported here: a subprocess test loads this module without the repo on sys.path.
        from tests.engines.gloo_teardown import leave_process_group

        leave_process_group(ok=ok)
