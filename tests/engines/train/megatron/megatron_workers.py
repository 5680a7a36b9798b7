"""Code run inside spawned ranks by the megatron engine tests (imported by the children).

Each rank installs the CPU shim, joins a gloo group on 127.0.0.1, runs the actor, critic
and (world 1) reference scenarios with a Megatron layout and saves its results to
``rank{r}.pt`` for the parent test to compare with the 1-rank and fsdp results.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

import torch

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from tests.engines.gloo_teardown import leave_process_group
from tests.engines.train.fsdp import fsdp_workers as fw  # the shared batch and losses

HERE = Path(__file__).resolve().parent


def port_of(out_dir: str) -> int:
    """The rendezvous port the parent wrote next to the results."""
    return int(Path(out_dir, "port").read_text())


def recipe(layout: dict) -> Recipe:
    """The fsdp tests' recipe on the megatron engine; ``layout`` holds the engine options and
    optionally ``num_hidden_layers`` (a deeper tiny model for virtual pipeline stages)."""
    options = {k: v for k, v in layout.items() if k != "num_hidden_layers"}
    base = fw.recipe(backend="megatron", options=options).model_dump()
    base["model"]["tiny"]["num_hidden_layers"] = layout.get("num_hidden_layers", 2)
    return Recipe.model_validate(base)


def rows_of(dp_rank: int, dp_size: int, n: int) -> slice:
    """DP shards, uneven on purpose (11 + 5 of 16) like the fsdp tests."""
    return fw.rows_of(dp_rank, dp_size, n)


def _fields(full, adv, rows: slice) -> dict[str, torch.Tensor]:
    batch = full.slice(rows)
    total = float(full.response_mask.sum())  # global normaliser: tokens of the whole batch
    return {"advantages": adv[rows], "response_mask": batch.response_mask,
            "normaliser": torch.full((batch.batch_size,), total), "returns": adv[rows]}


def _run(rank: int, world: int, out_dir: str, layout: dict) -> None:
    from rlctl.engines.train.contract import ModelEngineSpec
    from rlctl.engines.train.megatron.engine import MegatronEngine

    rec = recipe(layout)

    loaded = validate_recipe(rec)
    full, adv = fw.fixed_batch()
    actor = MegatronEngine(ModelEngineSpec.from_loaded(loaded, "actor", rank=rank,
        world_size=world))
    actor.init()
    rows = rows_of(actor.dp_rank, actor.dp_size, full.batch_size)
    batch, fields = full.slice(rows), _fields(full, adv, rows)
    res: dict = {"rows": (rows.start, rows.stop), "dp_rank": actor.dp_rank,
                 "dp_size": actor.dp_size, "writes_outputs": actor.writes_outputs}
    res["init_weights"] = actor.export_weights()
    res["log_probs"], res["entropy"] = actor.compute_log_prob(batch, temperature=0.7,
                                                              with_entropy=True)
    ckpt = os.path.join(out_dir, "ckpt")
    actor.save(ckpt)
    res["metrics"] = actor.train_minibatch(batch, fields, fw.policy_loss, temperature=0.7)
    res["weights"] = actor.export_weights()
    actor.load(ckpt)
    res["restored"] = actor.export_weights()
    res["lr_after_load"] = actor.train_minibatch(batch, fields, fw.policy_loss,
                                                 temperature=0.7)["lr"]
    if layout.get("num_hidden_layers"):  # the deep-model layouts only check the actor
        torch.save(res, os.path.join(out_dir, f"rank{rank}.pt"))
        _destroy()
        return
    critic = MegatronEngine(ModelEngineSpec.from_loaded(loaded, "critic", rank=rank,
        world_size=world))
    critic.init()
    res["values0"] = critic.compute_values(batch)
    res["critic_metrics"] = critic.train_minibatch(batch, fields, fw.value_loss)
    res["values1"] = critic.compute_values(batch)
    res["critic_weights"] = critic.export_weights()
    if world == 1:
        ref = MegatronEngine(ModelEngineSpec.from_loaded(loaded, "ref"))
        ref.init()
        res["ref_log_probs"], _ = ref.compute_log_prob(batch, temperature=0.7)
        res["fsdp"] = _fsdp_reference(batch, fields)
    torch.save(res, os.path.join(out_dir, f"rank{rank}.pt"))
    _destroy()


def _destroy() -> None:
    from megatron.core import parallel_state

    parallel_state.destroy_model_parallel()  # the next layout builds its own groups


def _fsdp_reference(batch, fields) -> dict:
    """The same scenario on the fsdp engine (1 rank, same process group)."""
    from rlctl.engines.train.contract import ModelEngineSpec
    from rlctl.engines.train.fsdp.engine import FSDPEngine

    rec = fw.recipe()

    loaded = validate_recipe(rec)
    actor = FSDPEngine(ModelEngineSpec.from_loaded(loaded, "actor"))
    actor.init()
    out: dict = {}
    out["log_probs"], out["entropy"] = actor.compute_log_prob(batch, temperature=0.7,
                                                              with_entropy=True)
    out["metrics"] = actor.train_minibatch(batch, fields, fw.policy_loss, temperature=0.7)
    out["weights"] = actor.export_weights()
    critic = FSDPEngine(ModelEngineSpec.from_loaded(loaded, "critic"))
    critic.init()
    out["critic_metrics"] = critic.train_minibatch(batch, fields, fw.value_loss)
    out["values1"] = critic.compute_values(batch)
    out["critic_weights"] = critic.export_weights()
    return out


def worker(rank: int, world: int, out_dir: str, layouts: dict[str, dict]) -> None:
    """Run each named layout in turn (one process pair for all: imports cost seconds)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port_of(out_dir)),
                      RANK=str(rank), WORLD_SIZE=str(world), GLOO_SOCKET_IFNAME="lo",
                      OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    # By its plain name, as the shim's sitecustomize imports it: one module, one install.
    sys.path.insert(0, str(HERE))
    import cuda_shim

    cuda_shim.install()
    ok = False
    try:
        for name, layout in layouts.items():
            os.makedirs(os.path.join(out_dir, name), exist_ok=True)
            _run(rank, world, os.path.join(out_dir, name), layout)
        ok = True
    except BaseException:
        traceback.print_exc()
        raise
    finally:
        leave_process_group(ok=ok)
