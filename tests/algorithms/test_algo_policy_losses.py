"""Policy losses on tokens whose ratios and advantages are written out by hand.

``old_log_prob = 0`` throughout, so ``log_prob = log r`` sets each token's ratio ``r``.
"""

from __future__ import annotations

import math

import pytest
import torch

from rlctl.algorithms.aggregation import LOSS_AGG_MODES, loss_normalizer
from rlctl.algorithms.covariance_losses import (
    compute_policy_loss_clip_cov,
    compute_policy_loss_kl_cov,
)
from rlctl.algorithms.off_policy import OffPolicyCorrection
from rlctl.algorithms.policy_loss_inputs import PolicyLossInputs
from rlctl.algorithms.policy_losses import (
    compute_policy_loss_cispo,
    compute_policy_loss_geo_mean,
    compute_policy_loss_gpg,
    compute_policy_loss_gspo,
    compute_policy_loss_sapo,
    compute_policy_loss_vanilla,
)

LOG = math.log


def _tokens(ratios, advantages, mask=None):
    """One response [1, T] with the given per-token ratios and advantages."""
    log_prob = torch.tensor([[LOG(r) for r in ratios]], requires_grad=True)
    old = torch.zeros(1, len(ratios))
    adv = torch.tensor([advantages], dtype=torch.float32)
    m = torch.ones(1, len(ratios)) if mask is None else torch.tensor([mask], dtype=torch.float32)
    return old, log_prob, adv, m


# (A, r) = (1, 1.5) clipped above; (1, 0.5) unclipped; (-1, 0.5) clipped below; (-1, 4)
# dual-clipped;
# the fifth token is padding with a wild ratio that must not count.
RATIOS = [1.5, 0.5, 0.5, 4.0, 50.0]
ADVS = [1.0, 1.0, -1.0, -1.0, 9.0]
PAD = [1, 1, 1, 1, 0]


def test_vanilla_ppo_clip_with_dual_clip_hand_computed():
    old, lp, adv, mask = _tokens(RATIOS, ADVS, PAD)
    loss, metrics = compute_policy_loss_vanilla(
        PolicyLossInputs(
            old,
            lp,
            adv,
            mask,
            loss_agg_mode="token-mean",
            clip_low=0.2,
            clip_high=0.2,
            clip_ratio_c=3.0,
        )
    )
    # per token: max(-1.5, -1.2) = -1.2; -0.5; max(0.5, 0.8) = 0.8; min(3, max(4, 1.2)) = 3
    assert loss.item() == pytest.approx((-1.2 - 0.5 + 0.8 + 3.0) / 4)
    assert metrics["pg_clipfrac"] == pytest.approx(2 / 4)
    assert metrics["pg_clipfrac_lower"] == pytest.approx(1 / 4)
    assert metrics["ppo_kl"] == pytest.approx(-LOG(1.5 * 0.5 * 0.5 * 4.0) / 4)
    loss.backward()
    # Only the unclipped token (A=1, r=0.5) has a gradient: d(-A r)/d log r = -A r / N.
    assert lp.grad.tolist()[0] == pytest.approx([0.0, -0.5 / 4, 0.0, 0.0, 0.0])


def test_vanilla_clip_higher_and_no_dual_clip():
    old, lp, adv, mask = _tokens(RATIOS, ADVS, PAD)
    higher, _ = compute_policy_loss_vanilla(
        PolicyLossInputs(
            old,
            lp,
            adv,
            mask,
            loss_agg_mode="token-mean",
            clip_low=0.2,
            clip_high=0.6,
            clip_ratio_c=3.0,
        )
    )
    assert higher.item() == pytest.approx((-1.5 - 0.5 + 0.8 + 3.0) / 4)
    no_dual, metrics = compute_policy_loss_vanilla(
        PolicyLossInputs(
            old,
            lp,
            adv,
            mask,
            loss_agg_mode="token-mean",
            clip_low=0.2,
            clip_high=0.2,
            clip_ratio_c=None,
        )
    )
    assert no_dual.item() == pytest.approx((-1.2 - 0.5 + 0.8 + 4.0) / 4)
    assert metrics["pg_clipfrac_lower"] == 0.0


def test_vanilla_rejects_a_dual_clip_bound_not_above_one():
    old, lp, adv, mask = _tokens(RATIOS, ADVS, PAD)
    with pytest.raises(ValueError, match="clip_ratio_c"):
        compute_policy_loss_vanilla(
            PolicyLossInputs(old, lp, adv, mask, loss_agg_mode="token-mean", clip_ratio_c=1.0)
        )


def test_clipped_loss_equals_unclipped_policy_gradient_when_ratios_are_one():
    torch.manual_seed(0)
    lp = (-torch.rand(3, 4)).requires_grad_()
    old = lp.detach().clone()
    adv = torch.randn(3, 4)
    mask = torch.tensor([[1.0, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]])
    loss, metrics = compute_policy_loss_vanilla(
        PolicyLossInputs(old, lp, adv, mask, loss_agg_mode="token-mean")
    )
    unclipped = -(adv * mask).sum() / mask.sum()  # -A r with r = 1
    assert loss.item() == pytest.approx(float(unclipped), abs=1e-6)
    assert metrics["pg_clipfrac"] == 0.0 and metrics["ppo_kl"] == 0.0
    loss.backward()
    torch.testing.assert_close(lp.grad, -adv * mask / mask.sum())


def test_gspo_clips_the_sequence_ratio():
    lp = torch.tensor([[LOG(2.0), 0.0], [0.0, 0.0]], requires_grad=True)
    old = torch.zeros(2, 2)
    adv = torch.tensor([[1.0, 1.0], [-1.0, -1.0]])
    mask = torch.ones(2, 2)
    loss, metrics = compute_policy_loss_gspo(
        PolicyLossInputs(
            old, lp, adv, mask, loss_agg_mode="seq-mean-token-mean", clip_low=0.2, clip_high=0.2
        )
    )
    # seq 0: s = exp(mean(log 2, 0)) = sqrt 2 > 1.2 -> -1.2 per token; seq 1: s = 1 -> +1.
    assert loss.item() == pytest.approx((-1.2 + 1.0) / 2)
    assert metrics["pg_clipfrac"] == pytest.approx(0.5)
    loss.backward()
    # Clipped sequence: no gradient; the other: d(A-weighted s)/d log pi_t = -A s / (T * B).
    assert lp.grad.tolist() == [[0.0, 0.0], [0.25, 0.25]]


def test_cispo_keeps_the_gradient_of_clipped_tokens():
    old, lp, adv, mask = _tokens([1.5, 0.5], [1.0, -1.0])
    loss, metrics = compute_policy_loss_cispo(
        PolicyLossInputs(
            old, lp, adv, mask, loss_agg_mode="token-mean", clip_low=0.2, clip_high=0.2
        )
    )
    # -sg[clip(r)] A log pi: -1.2 * log 1.5 and +0.8 * log 0.5 (A = -1), averaged.
    assert loss.item() == pytest.approx((-1.2 * LOG(1.5) + 0.8 * LOG(0.5)) / 2, rel=1e-6)
    assert metrics["pg_clipfrac"] == 1.0
    loss.backward()
    assert lp.grad.tolist()[0] == pytest.approx([-1.2 / 2, 0.8 / 2])


def test_sapo_gate_at_ratio_one():
    old, lp, adv, mask = _tokens([1.0, 1.0], [1.0, -1.0])
    loss, _ = compute_policy_loss_sapo(
        PolicyLossInputs(old, lp, adv, mask, loss_agg_mode="seq-mean-token-mean")
    )
    # f(1) = sigmoid(0) * 4 / tau = 2 / tau, tau = 1 for A > 0 and 1.05 otherwise.
    assert loss.item() == pytest.approx((-2.0 + 2.0 / 1.05) / 2, rel=1e-5)
    loss.backward()
    # f'(1) = 1: at ratio one SAPO's gradient is the plain policy gradient -A / N.
    assert lp.grad.tolist()[0] == pytest.approx([-0.5, 0.5])


def test_gpg_is_plain_policy_gradient():
    old, lp, adv, mask = _tokens([0.5, 0.25], [2.0, 1.0])
    loss, metrics = compute_policy_loss_gpg(
        PolicyLossInputs(old, lp, adv, mask, loss_agg_mode="token-mean")
    )
    assert loss.item() == pytest.approx((-2 * LOG(0.5) - LOG(0.25)) / 2)
    assert set(metrics) >= {"pg_clipfrac", "ppo_kl", "pg_clipfrac_lower"}


def test_geo_mean_clips_per_token_inside_the_geometric_mean():
    lp = torch.tensor([[0.1, 0.5], [-0.5, 0.3]])
    old = torch.zeros(2, 2)
    adv = torch.tensor([[1.0, 1.0], [-1.0, -1.0]])
    loss, metrics = compute_policy_loss_geo_mean(
        PolicyLossInputs(
            old,
            lp,
            adv,
            torch.ones(2, 2),
            loss_agg_mode="seq-mean-token-mean",
            clip_low=0.2,
            clip_high=0.2,
        )
    )
    # A > 0: min(l, clip(l)) = [0.1, 0.2]; A < 0: max(l, clip(l)) = [-0.2, 0.3].
    assert loss.item() == pytest.approx((-math.exp(0.15) + math.exp(0.05)) / 2)
    assert metrics["pg_clipfrac"] == pytest.approx(1 / 4)
    assert metrics["pg_clipfrac_lower"] == pytest.approx(2 / 4)


# Covariance-selection tokens: A = [2, -2, 0, 0] and log pi chosen so that
# cov = (A - mean A)(log pi - mean log pi) is known.
def test_clip_cov_drops_the_gradient_of_high_covariance_tokens():
    lp = torch.tensor([[0.0, -2.0, -1.0, -1.0]], requires_grad=True)  # cov = [2, 2, 0, 0]
    adv = torch.tensor([[2.0, -2.0, 0.0, 0.0]])
    loss, metrics = compute_policy_loss_clip_cov(
        PolicyLossInputs(lp.detach(), lp, adv, torch.ones(1, 4), loss_agg_mode="token-mean"),
        clip_cov_ratio=0.5,
    )
    assert loss.item() == 0.0 and metrics["pg_clipfrac"] == 0.5
    loss.backward()
    assert lp.grad.tolist() == [[0.0, 0.0, 0.0, 0.0]]
    one, metrics = compute_policy_loss_clip_cov(
        PolicyLossInputs(lp.detach(), lp, adv, torch.ones(1, 4), loss_agg_mode="token-mean"),
        clip_cov_ratio=0.25,
        generator=torch.Generator().manual_seed(0),
    )
    assert metrics["pg_clipfrac"] == 0.25 and one.item() in (
        pytest.approx(-0.5),
        pytest.approx(0.5),
    )


def test_kl_cov_penalises_the_top_covariance_token():
    lp = torch.tensor([[0.5, -2.0, -1.0, -1.5]])  # centred log pi: [1.5, -1, 0, -0.5]
    adv = torch.tensor([[2.0, -2.0, 0.0, 0.0]])  # cov = [3, 2, 0, 0]: token 0 is the top
    old = lp - torch.tensor([[0.1, 0.0, 0.0, 0.0]])
    loss, metrics = compute_policy_loss_kl_cov(
        PolicyLossInputs(old, lp, adv, torch.ones(1, 4), loss_agg_mode="token-mean"),
        kl_cov_ratio=0.25,
        ppo_kl_coef=0.1,
    )
    assert loss.item() == pytest.approx((-2 * math.exp(0.1) + 0.1 * 0.1 + 2.0) / 4)
    assert metrics["ppo_kl"] == pytest.approx(0.1 / 4)
    assert metrics["pg_clipfrac"] == 0.25


def test_truncated_importance_sampling_reweights_tokens():
    old, lp, adv, mask = _tokens([1.0, 1.0], [1.0, 1.0])
    rollout = torch.tensor([[LOG(2.0), LOG(0.25)]])  # exp(old - rollout) = [0.5, 4] -> cap 2
    loss, metrics = compute_policy_loss_vanilla(
        PolicyLossInputs(
            old,
            lp,
            adv,
            mask,
            loss_agg_mode="token-mean",
            rollout_log_probs=rollout,
            correction=OffPolicyCorrection("truncated_is", cap=2.0),
        )
    )
    assert loss.item() == pytest.approx((-0.5 - 2.0) / 2)
    assert metrics["tis_clipfrac"] == 0.5 and metrics["tis_weight_mean"] == pytest.approx(1.25)
    with pytest.raises(ValueError, match="rollout_log_probs is missing"):
        compute_policy_loss_vanilla(
            PolicyLossInputs(
                old,
                lp,
                adv,
                mask,
                loss_agg_mode="token-mean",
                correction=OffPolicyCorrection("truncated_is", cap=2.0),
            )
        )


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize(
    "loss_fn",
    [
        compute_policy_loss_vanilla,
        compute_policy_loss_gspo,
        compute_policy_loss_cispo,
        compute_policy_loss_sapo,
        compute_policy_loss_gpg,
        compute_policy_loss_geo_mean,
    ],
)
def test_micro_batch_policy_losses_and_gradients_sum_to_the_whole(loss_fn, mode):
    torch.manual_seed(1)
    lp = (-torch.rand(6, 5)).requires_grad_()
    old = lp.detach() + 0.3 * torch.randn(6, 5)
    adv = torch.randn(6, 1).expand(6, 5).contiguous()
    mask = (torch.arange(5)[None, :] < torch.tensor([5, 2, 3, 1, 4, 5])[:, None]).float()
    common = {
        "loss_agg_mode": mode,
        "clip_low": 0.2,
        "clip_high": 0.28,
        "clip_ratio_c": 3.0,
        "horizon": 5,
    }
    whole, _ = loss_fn(PolicyLossInputs(old, lp, adv, mask, **common))
    (whole_grad,) = torch.autograd.grad(whole, lp)
    parts = [slice(0, 1), slice(1, 4), slice(4, 6)]
    normalizer = sum(loss_normalizer(mask[p], mode) for p in parts)
    total = sum(
        loss_fn(
            PolicyLossInputs(old[p], lp[p], adv[p], mask[p], global_normalizer=normalizer, **common)
        )[0]
        for p in parts
    )
    (total_grad,) = torch.autograd.grad(total, lp)
    assert total.item() == pytest.approx(whole.item(), rel=1e-5, abs=1e-6)
    torch.testing.assert_close(total_grad, whole_grad, rtol=1e-5, atol=1e-6)
