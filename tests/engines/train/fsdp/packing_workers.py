"""Code that runs inside spawned ranks for the packing tests (imported by the children).

Every rank builds the same engines under several micro-batch layouts (rows and padding with
every prompt recomputed, the default shared prompt forward, a token budget, packing, both) and
rank 0 saves what each computed: log-probs, entropy, values, and
the weights after one SGD step (lr 1, no clipping: the weight change IS the gradient).
"""

from __future__ import annotations

import os
import traceback

import torch

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.train.batch import ModelBatch
from tests.engines.gloo_teardown import leave_process_group

PAD = 0
LAYOUTS = {
    "padded": {"share_prompts": False},  # the reference: one full forward per row
    "shared": {},  # the default: each distinct prompt of a micro-batch runs once
    "budget": {"max_tokens_per_micro_batch": 96},
    "packed": {"packing": True},
    "packed_budget": {"packing": True, "max_tokens_per_micro_batch": 96},
}


def recipe(options: dict) -> Recipe:
    return Recipe.model_validate({
        "run": {"seed": 3},
        # a valid recipe needs prompts (engines read none); samples as long as the batch's
        "data": {"task": "count_digits", "max_prompt_tokens": 8},
        "rollout": {"max_new_tokens": 16},
        "model": {"path": "tiny", "dtype": "float32"},
        "algorithm": {"optim": {"name": "sgd", "lr": 1.0, "grad_clip": None}},
        "critic": {"enabled": True, "lr": 1.0},
        "engines": {"train": {"micro_batch_size": 4, "log_prob_micro_batch_size": 5,
                              "options": options}},
    })


def variable_batch(n: int = 24, group: int = 3) -> tuple[ModelBatch, torch.Tensor]:
    """n samples whose responses vary 1-8x in length (2..16 tokens), prompts 2..8 tokens; each
    prompt is drawn for ``group`` consecutive samples (a group sampler's layout)."""
    g = torch.Generator().manual_seed(11)
    distinct = [torch.randint(4, 14, (int(torch.randint(2, 9, (1,), generator=g)),), generator=g)
                for _ in range(-(-n // group))]
    prompts = [p for p in distinct for _ in range(group)][:n]
    responses = [torch.randint(4, 30, (2 * int(torch.randint(1, 9, (1,), generator=g)),),
                               generator=g) for _ in range(n)]
    return ModelBatch.from_samples(prompts, responses, PAD), torch.randn(n, generator=g)


def policy_loss(out, f):
    mask = f["response_mask"]
    per_token = -(out["log_probs"] * f["advantages"][:, None]) - 0.01 * out["entropy"]
    return (per_token * mask).sum() / f["normaliser"][0], {}


def value_loss(out, f):
    mask = f["response_mask"]
    return (((out["values"] - f["returns"][:, None]) ** 2) * mask).sum() / f["normaliser"][0], {}


def _run(rank: int, world: int, port: int, out_path: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    from rlctl.engines.distributed import all_reduce_sum, group_device
    from rlctl.engines.train.contract import ModelEngineSpec
    from rlctl.engines.train.fsdp.engine import FSDPEngine

    full, adv = variable_batch()
    # Uneven on purpose: the ranks cut different numbers of micro-batches.
    rows = slice(0, 17) if rank == 0 else slice(17, full.batch_size)
    batch = full.slice(rows) if world == 2 else full
    adv = adv[rows] if world == 2 else adv
    results: dict = {}
    for name, options in LAYOUTS.items():
        rec = recipe(options)
        loaded = validate_recipe(rec)
        actor = FSDPEngine(ModelEngineSpec.from_loaded(loaded, "actor", rank=rank,
            world_size=world))
        actor.init()
        normaliser = all_reduce_sum(batch.response_mask.sum(), group_device())
        fields = {"advantages": adv, "response_mask": batch.response_mask,
                  "normaliser": torch.full((batch.batch_size,), normaliser)}
        lp, ent = actor.compute_log_prob(batch, temperature=0.7, with_entropy=True)
        metrics = actor.train_minibatch(batch, fields, policy_loss, temperature=0.7)
        critic = FSDPEngine(ModelEngineSpec.from_loaded(loaded, "critic", rank=rank,
            world_size=world))
        critic.init()
        critic.train_minibatch(batch, dict(fields, returns=adv), value_loss)
        results[name] = {"log_probs": lp, "entropy": ent, "loss": metrics["loss"],
                         "weights": actor.export_weights(), "values": critic.compute_values(batch),
                         "critic_weights": critic.export_weights()}
        actor.close()
        critic.close()
    if rank == 0:
        torch.save(results, out_path)


def worker(rank: int, world: int, port: int, out_path: str) -> None:
    ok = False
    try:
        _run(rank, world, port, out_path)
        ok = True
    except BaseException:
        traceback.print_exc()
        raise
    finally:
        leave_process_group(ok=ok)
