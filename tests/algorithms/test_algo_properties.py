"""Property tests: every registered estimator and loss, random shapes, masks and groups.

Each is called through the registry exactly as the trainer does (the common keyword set),
so a newly registered built-in is covered automatically.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlctl.algorithms import get_advantage_estimator, get_policy_loss
from rlctl.algorithms.aggregation import LOSS_AGG_MODES
from rlctl.algorithms.off_policy import OffPolicyCorrection
from rlctl.algorithms.policy_loss_inputs import PolicyLossInputs
from rlctl.registry import build_registry

REGISTRY = build_registry(external="none")
ESTIMATORS = [r.name for r in REGISTRY.all("advantage_estimator") if r.plugin.builtin]
LOSSES = [r.name for r in REGISTRY.all("policy_loss") if r.plugin.builtin]
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def batches(draw):
    """A [B, T] batch: random lengths (some empty), holes, 1-4 groups of unequal size."""
    b = draw(st.integers(2, 7))
    t = draw(st.integers(2, 6))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, t + 1, (b,), generator=gen)
    mask = (torch.arange(t)[None, :] < lengths[:, None]).float()
    holes = torch.rand(b, t, generator=gen) < 0.15
    mask = torch.where(holes & (torch.arange(t)[None, :] > 0), torch.zeros_like(mask), mask)
    if mask.sum() < 2:  # whitening estimators need two tokens in the batch
        mask[0, :2] = 1.0
    groups = draw(st.lists(st.sampled_from("abcd"), min_size=b, max_size=b))
    return {
        "mask": mask,
        "index": np.array(groups, dtype=object),
        "rewards": torch.randn(b, t, generator=gen) * mask * 3,
        "values": torch.randn(b, t, generator=gen),
        "old_log_probs": -torch.rand(b, t, generator=gen) * 4,
        "ref_log_probs": -torch.rand(b, t, generator=gen) * 4,
        "sum_pi_squared": torch.rand(b, t, generator=gen),
        "reward_baselines": torch.randn(b, generator=gen),
        "adv": torch.randn(b, t, generator=gen),
        "noise": torch.randn(b, t, generator=gen),
    }


def _estimate(name: str, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    fn = get_advantage_estimator(name)
    return fn(
        token_level_rewards=batch["rewards"], response_mask=batch["mask"], index=batch["index"],
        gamma=0.99, lam=0.95, norm_adv_by_std_in_grpo=True, epsilon=1e-6,
        values=batch["values"], reward_baselines=batch["reward_baselines"],
        old_log_probs=batch["old_log_probs"], ref_log_probs=batch["ref_log_probs"],
        sum_pi_squared=batch["sum_pi_squared"], reward_components={"score": batch["rewards"]},
    )


@pytest.mark.parametrize("name", ESTIMATORS)
@SETTINGS
@given(batch=batches())
def test_estimators_are_finite_shaped_and_masked(name, batch):
    adv, returns = _estimate(name, batch)
    assert adv.shape == returns.shape == batch["mask"].shape
    assert torch.isfinite(adv).all() and torch.isfinite(returns).all()
    assert torch.all(adv[batch["mask"] == 0] == 0), "advantage outside the response"


@SETTINGS
@given(batch=batches())
def test_grpo_group_means_are_zero(batch):
    adv, _ = _estimate("grpo", batch)
    per_sample = adv.sum(-1) / batch["mask"].sum(-1).clamp(min=1)
    nonempty = batch["mask"].sum(-1) > 0
    for g in set(batch["index"]):
        members = torch.tensor([x == g for x in batch["index"]])
        # all members must have a response for the group mean to be observable on tokens
        if members.sum() > 1 and bool(nonempty[members].all()):
            assert abs(float(per_sample[members].sum())) < 1e-4


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@SETTINGS
@given(batch=batches())
def test_losses_are_finite_and_ignore_values_outside_the_mask(name, mode, batch):
    fn = get_policy_loss(name)
    mask = batch["mask"]
    old = batch["old_log_probs"]
    lp = (old + 0.3 * batch["noise"]).requires_grad_()
    common = {"loss_agg_mode": mode, "clip_low": 0.2, "clip_high": 0.28, "clip_ratio_c": 3.0,
              "correction": OffPolicyCorrection("truncated_is", cap=2.0)}
    loss, metrics = fn(PolicyLossInputs(old, lp, batch["adv"], mask, **common,
                                        rollout_log_probs=batch["ref_log_probs"]),
                       generator=torch.Generator().manual_seed(0))
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert {"pg_clipfrac", "ppo_kl", "pg_clipfrac_lower"} <= set(metrics)
    assert all(np.isfinite(v) for v in metrics.values())
    (grad,) = torch.autograd.grad(loss, lp)
    assert torch.isfinite(grad).all() and torch.all(grad[mask == 0] == 0)
    # Padding may hold anything finite: the loss must not see it.
    pad = mask == 0
    garbage = lambda x: torch.where(pad, x + 7.5, x)
    again, _ = fn(PolicyLossInputs(garbage(old), garbage(lp.detach()), garbage(batch["adv"]),
                                   mask, **common,
                                   rollout_log_probs=garbage(batch["ref_log_probs"])),
                  generator=torch.Generator().manual_seed(0))
    assert float(again) == pytest.approx(float(loss.detach()), rel=1e-5, abs=1e-6)
