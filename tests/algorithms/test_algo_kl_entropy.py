"""KL estimators and controllers, reward penalty, entropy and the value loss, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from rlctl.algorithms.entropy import entropy_bonus, entropy_from_logits, sum_pi_squared_from_logits
from rlctl.algorithms.kl import (
    AdaptiveKLController,
    FixedKLController,
    apply_kl_penalty_to_rewards,
    kl_loss,
    kl_penalty,
    make_kl_controller,
)
from rlctl.algorithms.value_loss import compute_value_loss

LN2 = math.log(2)


@pytest.mark.parametrize(
    ("kind", "pi_over_ref_2", "ref_over_pi_2"),
    [
        # (estimate when pi = 2 ref, estimate when ref = 2 pi)
        ("k1", LN2, -LN2),
        ("k2", LN2**2 / 2, LN2**2 / 2),
        ("k3", 0.5 + LN2 - 1, 2 - LN2 - 1),
        ("abs", LN2, LN2),
        ("low_var_kl", 0.5 + LN2 - 1, 2 - LN2 - 1),
        ("mse", LN2**2 / 2, LN2**2 / 2),
    ],
)
def test_kl_estimators_hand_computed(kind, pi_over_ref_2, ref_over_pi_2):
    half, quarter = torch.tensor([[math.log(0.5)]]), torch.tensor([[math.log(0.25)]])
    assert float(kl_penalty(half, quarter, kind)) == pytest.approx(pi_over_ref_2)
    assert float(kl_penalty(quarter, half, kind)) == pytest.approx(ref_over_pi_2)


def test_straight_through_kl_has_k3_value_and_k2_gradient():
    lp = torch.tensor([[math.log(0.5)]], requires_grad=True)
    ref = torch.tensor([[math.log(0.25)]])
    value = kl_penalty(lp, ref, "k3+")
    assert float(value.detach()) == pytest.approx(0.5 + LN2 - 1)
    value.sum().backward()
    assert float(lp.grad) == pytest.approx(LN2)  # d/dlp of (lp - ref)^2 / 2


def test_unknown_kl_estimator_lists_the_choices():
    with pytest.raises(ValueError, match="choose k1, k2, k3 or abs"):
        kl_penalty(torch.zeros(1, 1), torch.zeros(1, 1), "k4")


def test_adaptive_controller_moves_towards_the_target_and_checkpoints():
    ctl = AdaptiveKLController(init=0.1, target=6.0, horizon=100)
    ctl.update(current_kl=12.0, n_steps=10)  # error clipped to +0.2: x (1 + 0.2 * 10 / 100)
    assert ctl.value == pytest.approx(0.102)
    ctl.update(current_kl=3.0, n_steps=10)  # error -0.5 clipped to -0.2
    assert ctl.value == pytest.approx(0.102 * 0.98)
    restored = make_kl_controller("adaptive", 0.5, target=6.0, horizon=100)
    restored.load_state_dict(ctl.state_dict())
    assert restored.value == ctl.value
    with pytest.raises(ValueError, match="controller to match"):
        FixedKLController(0.1).load_state_dict(ctl.state_dict())


def test_fixed_controller_never_changes():
    ctl = make_kl_controller("fixed", 0.05)
    ctl.update(current_kl=100.0, n_steps=1000)
    assert ctl.value == 0.05 and ctl.state_dict() == {"kind": "fixed", "value": 0.05}


def test_kl_penalty_in_the_reward():
    scores = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    old = torch.full((2, 3), -1.0)
    ref = torch.full((2, 3), -1.1)  # k1 = 0.1 on every token
    rewards, metrics = apply_kl_penalty_to_rewards(scores, old, ref, mask, coef=0.5, kind="k1")
    torch.testing.assert_close(rewards, scores - 0.05 * mask)
    assert metrics == {"reward_kl_penalty": pytest.approx(0.1), "reward_kl_penalty_coeff": 0.5}


def test_kl_loss_term_aggregates_with_gradient():
    lp = torch.tensor([[math.log(0.5), 0.0]], requires_grad=True)
    ref = torch.tensor([[math.log(0.25), 5.0]])
    loss, metrics = kl_loss(lp, ref, torch.tensor([[1.0, 0.0]]), "k1", "token-mean")
    assert float(loss.detach()) == pytest.approx(LN2) and metrics["kl_loss"] == pytest.approx(LN2)
    loss.backward()
    assert lp.grad.tolist() == [[1.0, 0.0]]


def test_entropy_and_sum_pi_squared_from_logits():
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [0.0, math.log(3), -1e4, -1e4]]])  # [1, 2, 4]
    h = entropy_from_logits(logits)
    assert h.tolist()[0] == pytest.approx(
        [math.log(4), -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))]
    )
    assert sum_pi_squared_from_logits(logits).tolist()[0] == pytest.approx([0.25, 0.625])
    huge = logits + 1e4  # shift invariance: no overflow, no cancellation
    assert torch.allclose(entropy_from_logits(huge), h, atol=1e-5)
    masked_vocab = torch.tensor([[[0.0, float("-inf")]]])
    assert entropy_from_logits(masked_vocab).tolist() == [[0.0]]


def test_chunked_statistics_equal_unchunked():
    logits = torch.randn(3, 5, 11)
    torch.testing.assert_close(
        entropy_from_logits(logits, chunk_size=4), entropy_from_logits(logits)
    )
    torch.testing.assert_close(
        sum_pi_squared_from_logits(logits, chunk_size=4), sum_pi_squared_from_logits(logits)
    )


def test_entropy_bonus_is_minus_coef_times_aggregated_entropy():
    entropy = torch.tensor([[1.0, 3.0], [2.0, 9.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    term, metrics = entropy_bonus(entropy, mask, coef=0.01, loss_agg_mode="token-mean")
    assert float(term.detach()) == pytest.approx(-0.01 * 2.0) and metrics[
        "entropy"
    ] == pytest.approx(2.0)


def test_value_loss_clipped_hand_computed():
    vpreds = torch.tensor([[1.0, 2.0]])
    values = torch.tensor([[0.5, 0.5]])
    returns = torch.tensor([[1.5, 0.0]])
    loss, metrics = compute_value_loss(
        vpreds, returns, values, torch.ones(1, 2), cliprange_value=0.2
    )
    # token 0: max(0.25, (0.7 - 1.5)^2 = 0.64); token 1: max(4, 0.49). 0.5 * mean.
    assert float(loss) == pytest.approx(0.5 * (0.64 + 4.0) / 2)
    assert metrics["vf_clipfrac"] == 0.5
