"""Advantage estimators on small batches written out by hand.

The batch below has interleaved groups of unequal size (a: 3 samples, b: 2, c: 1) and
responses of different lengths, so padding sits in the middle of the batch.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
import torch

from rlctl.algorithms.estimators import (
    compute_dr_grpo_advantage,
    compute_gdpo_advantage,
    compute_gpg_advantage,
    compute_grpo_advantage,
    compute_grpo_passk_advantage,
    compute_opo_advantage,
    compute_reinforce_plus_plus_baseline_advantage,
    compute_rloo_advantage,
)
from rlctl.algorithms.return_estimators import (
    compute_gae_advantage,
    compute_reinforce_plus_plus_advantage,
    compute_remax_advantage,
)
from rlctl.algorithms.token_baseline import (
    compute_optimal_token_baseline_advantage,
    compute_tir_optimal_token_baseline_advantage,
)

INDEX = np.array(["a", "b", "a", "c", "b", "a"], dtype=object)
SCORES = [1.0, 2.0, 0.0, 5.0, 4.0, 1.0]
LENGTHS = [3, 2, 1, 2, 3, 2]
T = 3


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Outcome reward on each response's last token; [6, 3] rewards and mask."""
    mask = torch.tensor([[1.0 if t < n else 0.0 for t in range(T)] for n in LENGTHS])
    rewards = torch.zeros(6, T)
    for i, (s, n) in enumerate(zip(SCORES, LENGTHS, strict=True)):
        rewards[i, n - 1] = s
    return rewards, mask


def _assert_close(actual: torch.Tensor, expected: list) -> None:
    torch.testing.assert_close(
        actual, torch.tensor(expected, dtype=actual.dtype), atol=1e-6, rtol=1e-6
    )


def _per_sample(adv: torch.Tensor, mask: torch.Tensor) -> list[float]:
    """Check the advantage is constant over each response and zero outside; return it."""
    out = []
    for i in range(adv.shape[0]):
        row = adv[i][mask[i].bool()]
        assert torch.allclose(row, row[0].expand_as(row)), f"row {i} is not constant: {row}"
        assert torch.all(adv[i][~mask[i].bool()] == 0)
        out.append(float(row[0]))
    return out


def test_grpo_hand_computed():
    rewards, mask = _batch()
    adv, returns = compute_grpo_advantage(rewards, mask, INDEX)
    std_a = math.sqrt(1 / 3)  # scores 1, 0, 1: unbiased variance 1/3
    std_b = math.sqrt(2)  # scores 2, 4
    expected = [
        (1 - 2 / 3) / (std_a + 1e-6),
        (2 - 3) / (std_b + 1e-6),
        (0 - 2 / 3) / (std_a + 1e-6),
        5 / (1 + 1e-6),  # group of one: mean 0, std 1 (verl)
        (4 - 3) / (std_b + 1e-6),
        (1 - 2 / 3) / (std_a + 1e-6),
    ]
    assert _per_sample(adv, mask) == pytest.approx(expected, rel=1e-6)
    assert torch.equal(adv, returns)


def test_grpo_advantages_have_zero_mean_per_group():
    rewards, mask = _batch()
    adv = _per_sample(compute_grpo_advantage(rewards, mask, INDEX)[0], mask)
    for group in ("a", "b"):
        assert sum(a for a, g in zip(adv, INDEX, strict=True) if g == group) == pytest.approx(
            0, abs=1e-6
        )


def test_grpo_accepts_integer_ids_as_a_list_and_as_a_tensor():
    rewards, mask = _batch()
    ids = [0, 1, 0, 2, 1, 0]
    ref = compute_grpo_advantage(rewards, mask, INDEX)[0]
    assert torch.equal(compute_grpo_advantage(rewards, mask, ids)[0], ref)
    assert torch.equal(compute_grpo_advantage(rewards, mask, torch.tensor(ids))[0], ref)


def test_grpo_rejects_an_index_of_the_wrong_length():
    rewards, mask = _batch()
    with pytest.raises(ValueError, match=r"one group id per sample: expected shape \(6,\)"):
        compute_grpo_advantage(rewards, mask, INDEX[:5])


def test_dr_grpo_never_divides_by_std_whatever_the_flag():
    rewards, mask = _batch()
    adv, _ = compute_dr_grpo_advantage(rewards, mask, INDEX, norm_adv_by_std_in_grpo=True)
    expected = [1 / 3, -1.0, -2 / 3, 5.0, 1.0, 1 / 3]
    assert _per_sample(adv, mask) == pytest.approx(expected, rel=1e-6)


def test_grpo_passk_credits_only_the_best_sample():
    rewards, mask = _batch()
    adv = _per_sample(compute_grpo_passk_advantage(rewards, mask, INDEX)[0], mask)
    # a: best 1 ties second-best 1 -> 0; b: 4 - 2 = 2 over std sqrt(2); c: alone -> 0.
    assert adv == pytest.approx([0, 0, 0, 0, 2 / (math.sqrt(2) + 1e-6), 0], abs=1e-6)
    raw = _per_sample(
        compute_grpo_passk_advantage(rewards, mask, INDEX, norm_adv_by_std_in_grpo=False)[0], mask
    )
    assert raw == pytest.approx([0, 0, 0, 0, 2, 0])


def test_rloo_hand_computed_and_baseline_excludes_the_sample():
    rewards, mask = _batch()
    adv = _per_sample(compute_rloo_advantage(rewards, mask, INDEX)[0], mask)
    assert adv == pytest.approx([0.5, -2.0, -1.0, 5.0, 2.0, 0.5])
    for i, g in enumerate(INDEX):
        others = [
            s for j, (s, h) in enumerate(zip(SCORES, INDEX, strict=True)) if h == g and j != i
        ]
        if others:
            assert adv[i] == pytest.approx(SCORES[i] - statistics.mean(others))


def test_opo_uses_the_length_weighted_baseline():
    rewards, mask = _batch()
    adv = _per_sample(compute_opo_advantage(rewards, mask, INDEX)[0], mask)
    # a: lengths 3, 1, 2 -> baseline (3*1 + 1*0 + 2*1)/6 = 5/6; b: (2*2 + 3*4)/5 = 3.2.
    assert adv == pytest.approx([1 / 6, -1.2, -5 / 6, 5.0, 0.8, 1 / 6])


def test_gpg_scales_by_batch_over_nonzero_rewards():
    rewards, mask = _batch()
    adv = _per_sample(compute_gpg_advantage(rewards, mask, INDEX)[0], mask)
    alpha = 6 / 5  # one of six scores is zero
    assert adv == pytest.approx([alpha / 3, -alpha, -2 * alpha / 3, 5 * alpha, alpha, alpha / 3])
    halved = _per_sample(compute_gpg_advantage(rewards, mask, INDEX, f_norm=2.0)[0], mask)
    assert halved == pytest.approx([a / 2 for a in adv])


def _whiten(per_token: list[float]) -> list[float]:
    mean, std = statistics.mean(per_token), statistics.stdev(per_token)
    return [(v - mean) / math.sqrt(std**2 + 1e-8) for v in per_token]


def test_reinforce_plus_plus_baseline_centres_then_whitens_over_tokens():
    rewards, mask = _batch()
    adv = _per_sample(compute_reinforce_plus_plus_baseline_advantage(rewards, mask, INDEX)[0], mask)
    centred = [1 / 3, -1.0, -2 / 3, 5.0, 1.0, 1 / 3]
    tokens = [c for c, n in zip(centred, LENGTHS, strict=True) for _ in range(n)]
    white = dict(zip(tokens, _whiten(tokens), strict=False))
    assert adv == pytest.approx([white[c] for c in centred], rel=1e-5)


def test_gdpo_normalises_each_component_then_whitens():
    rewards, mask = _batch()
    fmt = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])  # [B] form
    acc = rewards.clone()  # [B, T] form
    adv = _per_sample(
        compute_gdpo_advantage(
            rewards, mask, INDEX, reward_components={"format": fmt, "acc": acc},
            reward_keys=("format", "acc"), reward_weights=(0.5, 1.0),
        )[0],
        mask,
    )
    g_fmt = _per_sample(
        compute_grpo_advantage(fmt.unsqueeze(-1) * torch.eye(3)[0], mask, INDEX)[0], mask
    )
    g_acc = _per_sample(compute_grpo_advantage(acc, mask, INDEX)[0], mask)
    summed = [0.5 * f + a for f, a in zip(g_fmt, g_acc, strict=True)]
    tokens = [s for s, n in zip(summed, LENGTHS, strict=True) for _ in range(n)]
    mean, std = statistics.mean(tokens), statistics.stdev(tokens)
    assert adv == pytest.approx([(s - mean) / math.sqrt(std**2 + 1e-8) for s in summed], rel=1e-5)


def test_gdpo_names_a_missing_reward_key():
    rewards, mask = _batch()
    with pytest.raises(
        ValueError, match=r"\['length'\] are not among the reward components \['acc'\]"
    ):
        compute_gdpo_advantage(
            rewards, mask, INDEX, reward_components={"acc": rewards}, reward_keys=("length",)
        )


def test_gae_two_tokens_hand_computed():
    rewards = torch.tensor([[0.0, 1.0]])
    values = torch.tensor([[0.5, 0.4]])
    mask = torch.ones(1, 2)
    adv, returns = compute_gae_advantage(rewards, mask, values=values, gamma=0.9, lam=0.5)
    # t=1: delta = 1 - 0.4 = 0.6; t=0: delta = 0.9*0.4 - 0.5 = -0.14, A = -0.14 + 0.45*0.6 = 0.13
    assert returns.tolist()[0] == pytest.approx([0.13 + 0.5, 0.6 + 0.4])
    assert adv.tolist()[0] == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2)], rel=1e-6)


def test_gae_with_lambda_and_gamma_one_is_reward_to_go_minus_value():
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.5, 2.0, 7.0]])
    values = torch.tensor([[0.5, 0.2, 0.1], [0.3, 9.0, 0.6]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0]])  # an observation token mid-response
    adv, returns = compute_gae_advantage(rewards, mask, values=values, gamma=1.0, lam=1.0)
    # Reward-to-go over response tokens only (the masked token's reward and value are skipped).
    rtg = torch.tensor([[1.0, 1.0, 1.0], [7.5, 0.0, 7.0]])
    assert torch.allclose(returns * mask, rtg * mask)
    raw = (rtg - values) * mask
    kept = raw[mask.bool()].tolist()
    assert adv[mask.bool()].tolist() == pytest.approx(_whiten(kept), rel=1e-5)
    assert float(adv[1, 1]) == 0.0


def test_gae_without_values_says_a_critic_is_needed():
    rewards, mask = _batch()
    with pytest.raises(ValueError, match=r"enable \[critic\]"):
        compute_gae_advantage(rewards, mask)


def test_reinforce_plus_plus_discounts_and_carries_across_observation_tokens():
    rewards = torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 4.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0]])
    adv, returns = compute_reinforce_plus_plus_advantage(rewards, mask, gamma=0.5)
    # row 0: 2; 0 + 0.5*2 = 1; 1 + 0.5*1 = 1.5. row 1: 4; masked (carry 4, reward dropped); 0.5*4 =
    # 2.
    _assert_close(returns, [[1.5, 1.0, 2.0], [2.0, 0.0, 4.0]])
    assert adv[mask.bool()].tolist() == pytest.approx(_whiten([1.5, 1.0, 2.0, 2.0, 4.0]), rel=1e-5)
    assert float(adv[1, 1]) == 0.0


def test_remax_subtracts_the_greedy_reward():
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 2.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    adv, returns = compute_remax_advantage(rewards, mask, reward_baselines=torch.tensor([0.4, 3.0]))
    _assert_close(returns, [[1, 1, 1], [2, 2, 0]])
    _assert_close(adv, [[0.6, 0.6, 0.6], [-1, -1, 0]])
    with pytest.raises(ValueError, match="greedy"):
        compute_remax_advantage(rewards, mask)


def _otb_inputs(mask_rows, pis):
    """Two trajectories; trajectory 0 earns 1 at its last token, trajectory 1 earns 0."""
    mask = torch.tensor(mask_rows)
    rewards = torch.zeros_like(mask)
    last = int(mask[0].nonzero().max())
    rewards[0, last] = 1.0
    old_log_probs = torch.log(torch.tensor(pis)).unsqueeze(-1).expand_as(mask).clone()
    # sum_pi_squared = pi makes each step's weight 1 - 2 pi + pi = 1 - pi: 0.5 and 0.75.
    sum_pi_squared = torch.exp(old_log_probs)
    return rewards, mask, old_log_probs, sum_pi_squared


def test_optimal_token_baseline_hand_computed_with_zero_tail():
    rewards, mask, olp, spp = _otb_inputs([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], [0.5, 0.25])
    adv, returns = compute_optimal_token_baseline_advantage(
        rewards, mask, ["p", "p"], old_log_probs=olp, sum_pi_squared=spp
    )
    # W_0 = [0.5, 1.0, 1.5], W_1 = [0.75, 1.5, -]; G_0 = 1, G_1 = 0.
    # B_t = W_0 / (W_0 + W_1) = 0.4 at t = 0, 1; at t = 2 only trajectory 0 is left: zero tail.
    _assert_close(returns, [[1, 1, 1], [0, 0, 0]])
    _assert_close(adv, [[0.6, 0.6, 1.0], [-0.4, -0.4, 0.0]])
    no_tail, _ = compute_optimal_token_baseline_advantage(
        rewards, mask, ["p", "p"], old_log_probs=olp, sum_pi_squared=spp, handle_zero_tail=False
    )
    assert float(no_tail[0, 2]) == pytest.approx(0.0, abs=1e-6)  # baseline = its own return


def test_optimal_token_baseline_group_of_one_has_no_baseline():
    rewards, mask, olp, spp = _otb_inputs([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], [0.5, 0.25])
    adv, returns = compute_optimal_token_baseline_advantage(
        rewards, mask, ["p", "q"], old_log_probs=olp, sum_pi_squared=spp
    )
    assert torch.equal(adv, returns * mask)


def test_tir_optimal_token_baseline_aligns_by_valid_tokens():
    rewards, mask, olp, spp = _otb_inputs([[1.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]], [0.5, 0.25])
    adv, _ = compute_tir_optimal_token_baseline_advantage(
        rewards, mask, ["p", "p"], old_log_probs=olp, sum_pi_squared=spp
    )
    # Same numbers as the aligned case, with trajectory 0's observation token skipped.
    _assert_close(adv, [[0.6, 0.0, 0.6, 1.0], [-0.4, -0.4, 0.0, 0.0]])


def test_optimal_token_baseline_needs_engine_statistics():
    rewards, mask = _batch()
    with pytest.raises(ValueError, match="sum_pi_squared"):
        compute_optimal_token_baseline_advantage(rewards, mask, INDEX)


def test_every_estimator_ignores_keywords_it_does_not_use():
    rewards, mask = _batch()
    extra = {"gamma": 1.0, "lam": 1.0, "epsilon": 1e-6, "norm_adv_by_std_in_grpo": True,
             "values": torch.zeros_like(rewards), "some_future_field": object()}
    for fn in (compute_grpo_advantage, compute_rloo_advantage, compute_opo_advantage):
        adv, _ = fn(token_level_rewards=rewards, response_mask=mask, index=INDEX, **extra)
        assert adv.shape == rewards.shape
