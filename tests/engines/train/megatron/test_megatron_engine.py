"""megatron engine on real megatron-core (gloo, CPU shim): equal to fsdp and to HF, and
TP=2 / PP=2 / DP=2 (one pair of processes runs the three layouts) equal to TP=PP=DP=1.

Tolerances (fp32): log-probs and entropy 1e-5 (megatron vs fsdp vs HF differ only in
summation order: measured <= 1e-6); losses 1e-6 absolute; weights after one SGD step 1e-6.
"""

from __future__ import annotations

import pytest

pytest.importorskip("megatron.core", reason="megatron-core is not installed: "
                    "pip install megatron-core==0.16.1 (see docs/megatron.md)")

import torch
import torch.multiprocessing as mp

from rlctl.engines.train.log_probs import token_log_probs
from rlctl.models.loading import load_causal_lm
from rlctl.ports import free_port
from tests.engines.train.fsdp import fsdp_workers as fw
from tests.engines.train.megatron import megatron_workers as mw

LAYOUTS = {
    "tp2": {"tensor_parallel": 2},
    "pp2": {"pipeline_parallel": 2},
    "dp2": {"recompute_granularity": "full"},  # recomputation must not change the math
}


def _spawn(world: int, out_dir, layouts: dict[str, dict]) -> dict[str, list[dict]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "port").write_text(str(free_port()))
    mp.spawn(mw.worker, args=(world, str(out_dir), layouts), nprocs=world, join=True)
    return {name: [torch.load(out_dir / name / f"rank{r}.pt", weights_only=False)
                   for r in range(world)] for name in layouts}


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    return _spawn(1, tmp_path_factory.mktemp("mcore1"), {"one": {}})["one"][0]


@pytest.fixture(scope="module")
def all_two_ranks(tmp_path_factory):
    return _spawn(2, tmp_path_factory.mktemp("mcore2"), LAYOUTS)


@pytest.fixture(params=sorted(LAYOUTS))
def two_ranks(request, all_two_ranks):
    return request.param, all_two_ranks[request.param]


def _close(a: dict, b: dict, atol: float) -> None:
    assert list(a) == list(b)
    for key, value in a.items():
        torch.testing.assert_close(value, b[key], atol=atol, rtol=0, msg=key)


def test_export_is_the_hf_checkpoint(one_rank):
    """HF -> Megatron at init -> HF export is exact, with HF's own names and order."""
    hf = load_causal_lm(fw.recipe().model, seed=3).state_dict()
    assert list(one_rank["init_weights"]) == list(hf)
    for name, tensor in hf.items():
        assert torch.equal(one_rank["init_weights"][name], tensor), name


def test_log_probs_equal_fsdp_and_hf(one_rank):
    ref = one_rank["fsdp"]
    torch.testing.assert_close(one_rank["log_probs"], ref["log_probs"], atol=1e-5, rtol=0)
    torch.testing.assert_close(one_rank["entropy"], ref["entropy"], atol=1e-5, rtol=0)
    batch, _ = fw.fixed_batch()
    model = load_causal_lm(fw.recipe().model, seed=3).eval()
    with torch.no_grad():
        for i in range(batch.batch_size):
            width = batch.prompt_width
            prompt = batch.input_ids[i, :width][batch.attention_mask[i, :width].bool()]
            resp = batch.responses[i][batch.response_mask[i].bool()]
            logits = model(torch.cat([prompt, resp])[None]).logits[0, len(prompt) - 1 : -1]
            want, _ = token_log_probs(logits[None], resp[None], 0.7, False)
            got = one_rank["log_probs"][i]
            torch.testing.assert_close(got[: len(resp)], want[0], atol=1e-5, rtol=0)
            assert torch.all(got[len(resp):] == 0)


def test_update_equals_fsdp(one_rank):
    ref = one_rank["fsdp"]
    assert one_rank["metrics"]["loss"] == pytest.approx(ref["metrics"]["loss"], abs=1e-6)
    assert one_rank["metrics"]["grad_norm"] == pytest.approx(ref["metrics"]["grad_norm"],
                                                             rel=1e-5)
    assert one_rank["metrics"]["tokens"] == ref["metrics"]["tokens"]
    _close(one_rank["weights"], ref["weights"], atol=1e-6)
    moved = max((one_rank["weights"][k] - one_rank["init_weights"][k]).abs().max().item()
                for k in ref["weights"])
    assert moved > 1e-4  # the step really moved the weights


def test_critic_equals_fsdp(one_rank):
    ref = one_rank["fsdp"]
    assert torch.all(one_rank["values0"] == 0)  # zero-initialised value head
    assert one_rank["critic_metrics"]["loss"] == pytest.approx(
        ref["critic_metrics"]["loss"], abs=1e-6)
    torch.testing.assert_close(one_rank["values1"], ref["values1"], atol=1e-5, rtol=0)
    _close(one_rank["critic_weights"], ref["critic_weights"], atol=1e-6)


def test_reference_and_checkpoint(one_rank):
    torch.testing.assert_close(one_rank["ref_log_probs"], one_rank["log_probs"], atol=0,
                               rtol=0)
    _close(one_rank["restored"], one_rank["init_weights"], atol=0)
    assert one_rank["lr_after_load"] == pytest.approx(1e-1)


def test_two_ranks_equal_one_rank(one_rank, two_ranks):
    name, ranks = two_ranks
    writers = [r for r in ranks if r["writes_outputs"]]
    if name == "dp2":
        assert [r["dp_size"] for r in ranks] == [2, 2] and len(writers) == 2
        log_probs = torch.cat([r["log_probs"] for r in ranks])  # rows 0..10 then 11..15
        values1 = torch.cat([r["values1"] for r in ranks])
    else:
        assert [r["dp_size"] for r in ranks] == [1, 1] and len(writers) == 1
        want_writer = 0 if name == "tp2" else 1  # PP: the last stage writes
        assert ranks[want_writer]["writes_outputs"]
        log_probs, values1 = writers[0]["log_probs"], writers[0]["values1"]
    torch.testing.assert_close(log_probs, one_rank["log_probs"], atol=1e-5, rtol=0)
    torch.testing.assert_close(values1, one_rank["values1"], atol=1e-5, rtol=0)
    for writer in writers:
        assert writer["metrics"]["loss"] == pytest.approx(one_rank["metrics"]["loss"],
                                                          abs=1e-6)
        assert writer["metrics"]["grad_norm"] == pytest.approx(
            one_rank["metrics"]["grad_norm"], rel=1e-5)
        assert writer["critic_metrics"]["loss"] == pytest.approx(
            one_rank["critic_metrics"]["loss"], abs=1e-6)
    # export_weights: full and HF-named on global rank 0 only.
    assert all(not r["weights"] for r in ranks[1:])
    _close(ranks[0]["init_weights"], one_rank["init_weights"], atol=0)
    _close(ranks[0]["weights"], one_rank["weights"], atol=1e-6)
    _close(ranks[0]["critic_weights"], one_rank["critic_weights"], atol=1e-6)
    _close(ranks[0]["restored"], one_rank["init_weights"], atol=0)


@pytest.mark.slow
def test_interleaved_pipeline_equals_one_rank(tmp_path):
    """PP=4 x VPP=2 (4 processes, 8 layers, interleaved 1F1B) against 1 rank."""
    deep = {"num_hidden_layers": 8}
    one = _spawn(1, tmp_path / "one", {"one": deep})["one"][0]
    four = _spawn(4, tmp_path / "four", {"vpp": dict(deep, pipeline_parallel=4,
                                                     virtual_pipeline_parallel=2)})["vpp"]
    writer = four[3]
    assert writer["writes_outputs"] and not any(r["writes_outputs"] for r in four[:3])
    torch.testing.assert_close(writer["log_probs"], one["log_probs"], atol=1e-5, rtol=0)
    assert writer["metrics"]["loss"] == pytest.approx(one["metrics"]["loss"], abs=1e-6)
    assert writer["metrics"]["grad_norm"] == pytest.approx(one["metrics"]["grad_norm"],
                                                           rel=1e-5)
    _close(four[0]["weights"], one["weights"], atol=1e-6)
    _close(four[0]["restored"], one["init_weights"], atol=0)
