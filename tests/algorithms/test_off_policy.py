"""Off-policy corrections on ratios written out by hand.

``old_log_prob`` (the proximal policy) is 0 and ``rollout_log_probs = -log r`` sets each
token's behaviour ratio ``r = pi_prox / pi_behav``; ``log_prob = log q`` sets the PPO ratio
``q = pi_theta / pi_prox``.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from rlctl.algorithms.off_policy import OffPolicyCorrection, resolve_correction
from rlctl.algorithms.policy_loss_inputs import PolicyLossInputs
from rlctl.algorithms.policy_losses import (
    compute_policy_loss_geo_mean,
    compute_policy_loss_vanilla,
)
from rlctl.config.recipe import CorrectionSection

LOG = math.log


def _behaviour(ratios: list[list[float]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(old_log_prob = 0, rollout_log_probs = -log r), both [B, T]."""
    rollout = torch.tensor([[-LOG(r) for r in row] for row in ratios])
    return torch.zeros_like(rollout), rollout


def test_truncated_is_caps_each_weight():
    old, rollout = _behaviour([[0.5, 4.0, 1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is padding
    w, m = OffPolicyCorrection("truncated_is", cap=2.0).weights(old, rollout, mask)
    assert torch.allclose(w, torch.tensor([[0.5, 2.0, 0.0]]))
    assert m["tis_clipfrac"] == 0.5
    assert (
        m["is_weight_mean"] == pytest.approx(1.25) and m["tis_weight_mean"] == m["is_weight_mean"]
    )
    # k1 estimate of KL(behaviour || proximal): mean of log pi_behav - log pi_prox
    assert m["rollout_kl"] == pytest.approx((-LOG(0.5) - LOG(4.0)) / 2)


def test_masked_is_token_level_drops_tokens_outside_the_bounds():
    old, rollout = _behaviour([[0.25, 1.5, 3.0, 0.5]])
    mask = torch.ones(1, 4)
    w, m = OffPolicyCorrection("masked_is", low=0.5, high=2.0).weights(old, rollout, mask)
    assert torch.allclose(w, torch.tensor([[0.0, 1.5, 0.0, 0.5]]))  # bounds are inclusive
    assert m["is_masked_frac"] == 0.5
    assert m["is_weight_mean"] == pytest.approx(2.0 / 4)


def test_masked_is_sequence_level_uses_the_geometric_mean_ratio():
    # row 0: ratios 2 and 1/2 -> R = 1, kept; row 1: 4 and 4 -> R = 4, masked;
    # row 2: 1.5 then padding (any ratio) -> R = 1.5, kept, padding weight 0
    old, rollout = _behaviour([[2.0, 0.5], [4.0, 4.0], [1.5, 1000.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    corr = OffPolicyCorrection("masked_is", low=0.5, high=2.0, level="sequence")
    w, m = corr.weights(old, rollout, mask)
    assert torch.allclose(w, torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.5, 0.0]]))
    assert m["is_masked_frac"] == pytest.approx(2 / 5)
    assert m["is_weight_mean"] == pytest.approx(3.5 / 5)


def test_decoupled_ppo_weights_by_the_behaviour_ratio_and_clips_around_the_proximal():
    # behaviour ratios 0.5, 4 (kept: <= cap 5) and 6 (masked); the PPO ratio q = 1.5 on
    # every token is clipped at 1 + 0.2 around pi_prox (A = 1): each kept token adds
    # -1.2 * r; a masked one adds 0 but still counts in the token-mean normaliser.
    old, rollout = _behaviour([[0.5, 4.0, 6.0]])
    log_prob = torch.full((1, 3), LOG(1.5), requires_grad=True)
    adv, mask = torch.ones(1, 3), torch.ones(1, 3)
    corr = OffPolicyCorrection("decoupled_ppo", cap=5.0)
    loss, m = compute_policy_loss_vanilla(
        PolicyLossInputs(
            old,
            log_prob,
            adv,
            mask,
            loss_agg_mode="token-mean",
            clip_low=0.2,
            clip_high=0.2,
            rollout_log_probs=rollout,
            correction=corr,
        )
    )
    assert loss.item() == pytest.approx((-1.2 * 0.5 - 1.2 * 4.0 + 0.0) / 3)
    assert m["is_masked_frac"] == pytest.approx(1 / 3)
    assert m["is_weight_mean"] == pytest.approx(4.5 / 3)
    assert m["pg_clipfrac"] == 1.0  # q = 1.5 is past 1.2 on every token: the clip is on q


def test_weights_are_constants_of_the_gradient():
    # unclipped PPO (q = 1): d loss / d log_prob_t = -A_t * w_t / T for token-mean
    old, rollout = _behaviour([[0.5, 3.0]])
    log_prob = torch.zeros(1, 2, requires_grad=True)
    adv, mask = torch.tensor([[1.0, -2.0]]), torch.ones(1, 2)
    corr = OffPolicyCorrection("masked_is", low=0.0, high=2.0)  # 3.0 is masked
    loss, _ = compute_policy_loss_vanilla(
        PolicyLossInputs(
            old,
            log_prob,
            adv,
            mask,
            loss_agg_mode="token-mean",
            clip_ratio_c=None,
            rollout_log_probs=rollout,
            correction=corr,
        )
    )
    (grad,) = torch.autograd.grad(loss, log_prob)
    assert torch.allclose(grad, torch.tensor([[-1.0 * 0.5 / 2, 0.0]]))


def test_none_leaves_the_loss_unchanged_and_adds_no_metrics():
    old, rollout = _behaviour([[0.5, 4.0]])
    log_prob = torch.tensor([[LOG(1.1), LOG(0.7)]])
    adv, mask = torch.tensor([[1.0, -1.0]]), torch.ones(1, 2)
    plain, plain_m = compute_policy_loss_vanilla(PolicyLossInputs(old, log_prob, adv, mask))
    none, none_m = compute_policy_loss_vanilla(
        PolicyLossInputs(
            old,
            log_prob,
            adv,
            mask,
            rollout_log_probs=rollout,
            correction=OffPolicyCorrection("none"),
        )
    )
    assert none.item() == plain.item() and none_m == plain_m


def test_a_sequence_loss_takes_the_geometric_mean_of_the_token_weights():
    # GMPO with q = 1 and A = 1: L_i = -1 * geomean(w_i); one masked token masks the sequence
    old, rollout = _behaviour([[0.5, 2.0], [1.0, 9.0]])
    log_prob, adv, mask = torch.zeros(2, 2), torch.ones(2, 2), torch.ones(2, 2)
    loss, m = compute_policy_loss_geo_mean(
        PolicyLossInputs(
            old,
            log_prob,
            adv,
            mask,
            loss_agg_mode="seq-mean-token-mean",
            rollout_log_probs=rollout,
            correction=OffPolicyCorrection("decoupled_ppo", cap=5.0),
        )
    )
    assert loss.item() == pytest.approx((-1.0 + 0.0) / 2, abs=1e-4)
    assert m["is_masked_frac"] == 0.25


def test_a_correction_without_rollout_log_probs_is_refused():
    old, log_prob, adv, mask = (torch.zeros(1, 2),) * 4
    with pytest.raises(
        ValueError, match="masked_is off-policy correction is on but rollout_log_probs is missing"
    ):
        compute_policy_loss_vanilla(
            PolicyLossInputs(old, log_prob, adv, mask, correction=OffPolicyCorrection("masked_is"))
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "truncated_is", "cap": 0.0}, "positive cap"),
        ({"method": "decoupled_ppo", "cap": 1.0}, "must be > 1"),
        ({"method": "masked_is", "low": 2.0, "high": 1.0}, "low < high"),
        ({"method": "clipped"}, "unknown off-policy correction"),
    ],
)
def test_bad_corrections_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OffPolicyCorrection(**kwargs)


def _section(**kw):
    return CorrectionSection.model_validate(kw)


@pytest.mark.parametrize(
    ("section", "k", "expected"),
    [
        (_section(), 0, OffPolicyCorrection("none")),  # sync: numbers unchanged
        (_section(), 1, OffPolicyCorrection("decoupled_ppo", cap=5.0)),
        (_section(method="truncated_is", cap=3.0), 0, OffPolicyCorrection("truncated_is", cap=3.0)),
        (_section(method="truncated_is"), 1, OffPolicyCorrection("truncated_is", cap=2.0)),
        (
            _section(method="masked_is", level="sequence", high=3.0),
            2,
            OffPolicyCorrection("masked_is", low=0.5, high=3.0, level="sequence"),
        ),
        (_section(method="decoupled_ppo"), 1, OffPolicyCorrection("decoupled_ppo", cap=5.0)),
        (_section(method="none"), 2, OffPolicyCorrection("none")),
    ],
)
def test_the_recipe_resolves_to_one_correction(section, k, expected):
    assert resolve_correction(section, max_staleness=k) == expected


def test_resolve_reads_only_the_section_fields():
    fake = SimpleNamespace(method="truncated_is", cap=4.0, low=0.5, high=2.0, level="token")
    assert resolve_correction(fake, max_staleness=0).cap == 4.0
