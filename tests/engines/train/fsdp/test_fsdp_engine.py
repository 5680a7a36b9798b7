"""FSDP2 engine: 2 gloo ranks equal 1 rank; log-probs equal a plain HF forward; checkpoints."""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp

from rlctl.engines.train.log_probs import token_log_probs
from rlctl.models.loading import load_causal_lm
from rlctl.ports import free_port
from tests.engines.train.fsdp import fsdp_workers as fw


def _spawn(world: int, out_dir, scenario: str) -> dict:
    out = out_dir / f"world{world}.pt"
    mp.spawn(fw.worker, args=(world, free_port(), str(out), scenario), nprocs=world,
             join=True)
    return torch.load(out, weights_only=False)


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    return _spawn(1, tmp_path_factory.mktemp("fsdp1"), "all")


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    return _spawn(2, tmp_path_factory.mktemp("fsdp2"), "train")


@pytest.fixture(scope="module")
def two_ranks_per_layer(tmp_path_factory):
    return _spawn(2, tmp_path_factory.mktemp("fsdp2l"), "train_per_layer")


def test_log_probs_equal_plain_hf_forward(one_rank):
    batch, _ = fw.fixed_batch()
    model = load_causal_lm(fw.recipe().model, seed=3).eval()
    with torch.no_grad():
        for i in range(batch.batch_size):
            width = batch.prompt_width
            prompt = batch.input_ids[i, :width][batch.attention_mask[i, :width].bool()]
            resp = batch.responses[i][batch.response_mask[i].bool()]
            logits = model(torch.cat([prompt, resp])[None]).logits[0, len(prompt) - 1 : -1]
            want, want_ent = token_log_probs(logits[None], resp[None], 0.7, True)
            n = len(resp)
            torch.testing.assert_close(one_rank["log_probs"][i, :n], want[0], atol=1e-5, rtol=0)
            torch.testing.assert_close(one_rank["entropy"][i, :n], want_ent[0], atol=1e-5, rtol=0)
            assert torch.all(one_rank["log_probs"][i, n:] == 0)  # padding is zeroed


def test_two_ranks_update_equals_one_rank(one_rank, two_ranks):
    assert two_ranks["metrics"]["loss"] == pytest.approx(one_rank["metrics"]["loss"], abs=1e-6)
    assert two_ranks["metrics"]["grad_norm"] == pytest.approx(
        one_rank["metrics"]["grad_norm"], rel=1e-5)
    assert set(two_ranks["weights"]) == set(one_rank["weights"])
    for name, w in one_rank["weights"].items():
        torch.testing.assert_close(two_ranks["weights"][name], w, atol=1e-6, rtol=0)
    # The update really moved the weights (the comparison is not vacuous).
    init = load_causal_lm(fw.recipe().model, seed=3).state_dict()
    moved = max((one_rank["weights"][k] - init[k]).abs().max().item() for k in init)
    assert moved > 1e-4


def test_a_small_model_is_one_fsdp_unit_with_the_same_numbers(two_ranks, two_ranks_per_layer):
    # shard_layers auto: the tiny model (300 KB of parameters) is one unit, not 2 layers + root
    assert two_ranks["fsdp_units"] == 1
    assert two_ranks_per_layer["fsdp_units"] == fw.recipe().model.tiny.num_hidden_layers + 1
    # Per-rank sums reduce in the same order either way: the same numbers to the bit.
    for key in ("log_probs", "entropy"):
        assert torch.equal(two_ranks[key], two_ranks_per_layer[key])
    assert two_ranks["metrics"] == two_ranks_per_layer["metrics"]
    for name, w in two_ranks_per_layer["weights"].items():
        assert torch.equal(two_ranks["weights"][name], w), name


def test_two_rank_critic_equals_one_rank(one_rank, two_ranks):
    assert torch.all(one_rank["values0"] == 0)  # zero-initialised value head
    assert two_ranks["critic_metrics"]["loss"] == pytest.approx(
        one_rank["critic_metrics"]["loss"], abs=1e-6)
    for name, w in one_rank["critic_weights"].items():
        torch.testing.assert_close(two_ranks["critic_weights"][name], w, atol=1e-6, rtol=0)
    assert one_rank["values1"].abs().sum() > 0


def test_metrics_report_lr_and_grad_norm(one_rank):
    m = one_rank["metrics"]
    assert m["lr"] == pytest.approx(1e-1)
    assert 0 < m["grad_norm"] < float("inf")
    assert m["tokens"] > 0


def test_reference_matches_initial_actor(one_rank):
    torch.testing.assert_close(one_rank["ref_log_probs"], one_rank["log_probs"], atol=1e-6, rtol=0)


def test_checkpoint_round_trip(one_rank):
    assert one_rank["ckpt_moved"] > 1e-5
    assert one_rank["ckpt_restored"] == 0.0
    # The scheduler came back too: constant schedule keeps the same lr after load.
    assert one_rank["ckpt_lr"] == pytest.approx(1e-1)


def test_rollout_log_probs_match_engine(one_rank):
    r = one_rank["rollout"]
    assert r["versions"] == {5}
    diff = ((r["engine"] - r["rollout"]) * r["mask"]).abs().max().item()
    assert diff < 1e-4


@pytest.mark.parametrize("role", ["actor", "critic"])
def test_exported_weights_equal_the_full_state_dict(two_ranks, role):
    """Two ranks export by unsharding each FSDP unit (full_weights.py): the same keys (tied
    weights under both names) and values as DCP's full state dict."""
    key = "weights" if role == "actor" else "critic_weights"
    fast, dcp = two_ranks[key], two_ranks[f"{key}_dcp"]
    assert sorted(fast) == sorted(dcp)
    for name, value in dcp.items():
        assert fast[name].dtype == value.dtype and torch.equal(fast[name], value), name
