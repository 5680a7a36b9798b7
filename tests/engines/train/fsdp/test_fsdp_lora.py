"""The fsdp engine with LoRA (``[model.lora]``): only the adapters train, the base model with
the adapters off equals a separately loaded reference, 2 gloo ranks (FSDP2 wrapping the PEFT
model) equal 1, checkpoints hold only the adapters and restore exactly, and after an adapter or
a merged sync the hf rollout engine's log-probs equal the trainer's."""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp

from rlctl.models.param_count import trained_parameters
from rlctl.ports import free_port
from tests.engines.train.fsdp import lora_workers as lw

pytestmark = pytest.mark.slow

# fp32 on both sides: the same math up to summation order (docs/lora.md)
LOG_PROB_ATOL = 1e-5


def _spawn(world: int, out_dir, scenario: str = "unit") -> dict:  # type: ignore[no-untyped-def]
    out = out_dir / f"world{world}.pt"
    mp.spawn(lw.worker, args=(world, free_port(), str(out), scenario), nprocs=world, join=True)
    return torch.load(out, weights_only=False)


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):  # type: ignore[no-untyped-def]
    return _spawn(1, tmp_path_factory.mktemp("lora1"))


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):  # type: ignore[no-untyped-def]
    return _spawn(2, tmp_path_factory.mktemp("lora2"), "per_layer")


def test_only_the_adapters_get_gradients_and_optimizer_state(one_rank) -> None:
    trainable = one_rank["trainable"]
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    # what `config show` counts: rank * (in + out) on each of the 14 linear layers
    count = trained_parameters(lw.recipe().model)
    assert not isinstance(count, str)
    assert one_rank["optimized"] == count.trainable == 8192
    assert one_rank["metrics"]["grad_norm"] > 0


def test_gradient_checkpointing_gives_the_adapters_the_same_gradient(one_rank) -> None:
    assert one_rank["checkpointed_grad_norm"] == pytest.approx(
        one_rank["metrics"]["grad_norm"], rel=1e-6)


def test_the_adapters_start_as_the_base_and_the_update_moves_them(one_rank) -> None:
    torch.testing.assert_close(one_rank["before"], one_rank["ref"], rtol=0, atol=0)
    assert (one_rank["after"] - one_rank["before"]).abs().max() > 1e-3


def test_the_reference_for_free_equals_a_separately_loaded_base(one_rank, two_ranks) -> None:
    """After an update, the actor's module with its adapters off is the base model: the same
    log-probs as the frozen reference engine built from the recipe (no second copy)."""
    torch.testing.assert_close(one_rank["base"], one_rank["ref"], rtol=0, atol=1e-6)
    n = two_ranks["base"].shape[0]  # rank 0's rows of the 2-rank split
    torch.testing.assert_close(two_ranks["base"], one_rank["ref"][:n], rtol=0, atol=1e-6)


def test_two_ranks_wrapping_the_peft_model_equal_one_rank(one_rank, two_ranks) -> None:
    assert two_ranks["metrics"]["loss"] == pytest.approx(one_rank["metrics"]["loss"], abs=1e-6)
    assert two_ranks["metrics"]["grad_norm"] == pytest.approx(
        one_rank["metrics"]["grad_norm"], rel=1e-5)
    tensors1, config1 = one_rank["adapter"]
    tensors2, config2 = two_ranks["adapter"]
    assert config1 == config2 and set(tensors1) == set(tensors2)
    for name, value in tensors1.items():
        torch.testing.assert_close(tensors2[name], value, rtol=0, atol=1e-6)
    for name, value in one_rank["merged"].items():
        torch.testing.assert_close(two_ranks["merged"][name], value, rtol=0, atol=1e-6)


def test_the_adapter_gather_equals_dcps(two_ranks) -> None:
    """One all-gather of every rank's adapter shards gives DCP's full trainable state."""
    from rlctl.models.lora import PEFT_PREFIX

    tensors, _ = two_ranks["adapter"]
    dcp = {k: v for k, v in two_ranks["trainable_dcp"].items() if "lora_" in k}
    assert len(tensors) == len(dcp) == 28
    for name, value in dcp.items():
        saved = PEFT_PREFIX + name.replace(".default.", ".")
        assert torch.equal(tensors[saved], value), name


def test_the_merged_export_is_the_plain_model_with_the_adapters_merged(one_rank) -> None:
    merged = one_rank["merged"]
    assert not any("lora_" in k or "base_layer" in k for k in merged)
    from rlctl.models.loading import load_causal_lm

    plain = load_causal_lm(lw.recipe().model, seed=3)
    assert set(merged) - {"lm_head.weight"} == set(plain.state_dict()) - {"lm_head.weight"}
    moved = [k for k in merged if not torch.equal(merged[k], plain.state_dict()[k])]
    assert moved and all("proj" in k for k in moved)  # only the adapted linear layers


def test_checkpoints_hold_only_the_adapters_and_restore_exactly(one_rank) -> None:
    assert one_rank["ckpt_keys"] == one_rank["trainable"]
    assert one_rank["ckpt_moved"] > 1e-4
    assert one_rank["ckpt_restored"] == 0
    first, again = one_rank["ckpt_update"]
    assert again == first
    assert one_rank["ckpt_update_lands"] == 0


@pytest.mark.parametrize("sync", ["adapter", "merged"])
def test_rollout_log_probs_equal_the_trainers_after_a_sync(one_rank, sync: str) -> None:
    for version, r in one_rank["rollout"][sync].items():
        assert r["versions"] == {version}
        mask = r["mask"].bool()
        assert mask.sum() > 10
        diff = (r["engine"] - r["rollout"])[mask].abs().max()
        assert diff < LOG_PROB_ATOL, (sync, version, float(diff))
    # the second version really is another policy (the comparison is not vacuous)
    first, second = one_rank["rollout"][sync][1], one_rank["rollout"][sync][2]
    assert not torch.equal(first["engine"], second["engine"])
