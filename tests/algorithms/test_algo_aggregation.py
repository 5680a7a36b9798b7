"""Masked reductions and loss aggregation: hand-computed values and the micro-batch sum law."""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from rlctl.algorithms.aggregation import LOSS_AGG_MODES, agg_loss, loss_normalizer
from rlctl.algorithms.masked import masked_mean, masked_var, masked_whiten

LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])


def test_masked_whiten_uses_bessel_corrected_variance():
    values = torch.tensor([[1.0, 2.0, 99.0], [3.0, 4.0, -99.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]])
    kept = [1.0, 2.0, 3.0, 4.0]
    expected_std = statistics.stdev(kept)  # Bessel: divides by n - 1
    assert float(masked_var(values, mask)) == pytest.approx(expected_std**2)
    white = masked_whiten(values, mask)
    for (i, j), v in zip([(0, 0), (0, 1), (1, 0), (1, 1)], kept, strict=True):
        assert float(white[i, j]) == pytest.approx((v - 2.5) / math.sqrt(expected_std**2 + 1e-8))


def test_masked_var_of_a_single_token_fails_loudly():
    with pytest.raises(ValueError, match="at least 2 unmasked tokens"):
        masked_var(torch.tensor([[1.0, 2.0]]), torch.tensor([[1, 0]]))


def test_masked_mean_ignores_nan_outside_the_mask():
    values = torch.tensor([[1.0, float("nan")], [3.0, 5.0]])
    mask = torch.tensor([[1, 0], [1, 1]])
    assert float(masked_mean(values, mask)) == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 15 / 5),
        ("seq-mean-token-sum", (6 + 9) / 2),
        ("seq-mean-token-mean", (6 / 3 + 9 / 2) / 2),
        ("seq-mean-token-sum-norm", (6 + 9) / (2 * 3)),
    ],
)
def test_agg_loss_hand_computed(mode, expected):
    assert float(agg_loss(LOSS, MASK, mode)) == pytest.approx(expected)


def test_seq_mean_token_sum_norm_divides_by_the_given_horizon():
    assert float(agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", horizon=5)) == pytest.approx(
        15 / 10
    )


def test_empty_sequences_do_not_count_and_garbage_is_ignored():
    loss = torch.cat([LOSS, torch.tensor([[float("nan"), 7.0, 7.0]])])
    mask = torch.cat([MASK, torch.zeros(1, 3)])
    assert float(agg_loss(loss, mask, "seq-mean-token-sum")) == pytest.approx(7.5)
    assert float(agg_loss(loss, mask, "token-mean")) == pytest.approx(3.0)
    assert float(loss_normalizer(mask, "seq-mean-token-mean")) == 2
    assert float(loss_normalizer(mask, "token-mean")) == 5


def test_all_masked_batch_gives_zero_not_nan():
    for mode in LOSS_AGG_MODES:
        assert float(agg_loss(torch.ones(2, 3), torch.zeros(2, 3), mode)) == 0.0


def test_unknown_mode_is_named_in_the_error():
    with pytest.raises(ValueError, match="token-sum-mean.*token-mean"):
        agg_loss(LOSS, MASK, "token-sum-mean")


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_micro_batch_losses_sum_to_the_full_batch_loss(mode):
    torch.manual_seed(0)
    loss = torch.randn(7, 6)
    lengths = torch.tensor([6, 1, 0, 3, 5, 2, 4])
    mask = (torch.arange(6)[None, :] < lengths[:, None]).float()
    whole = agg_loss(loss, mask, mode, horizon=6)
    parts = [slice(0, 2), slice(2, 3), slice(3, 7)]
    normalizer = sum(loss_normalizer(mask[p], mode) for p in parts)
    # Each micro-batch is trimmed to its own longest response, as a packing engine would.
    total = 0.0
    for p in parts:
        width = max(int(lengths[p].max()), 1)
        total = total + agg_loss(
            loss[p, :width], mask[p, :width], mode, global_normalizer=normalizer, horizon=6
        )
    assert float(total) == pytest.approx(float(whole), rel=1e-6)


def test_half_precision_losses_are_reduced_in_float32():
    loss = torch.full((1, 4099), 1.0, dtype=torch.bfloat16)
    mask = torch.ones(1, 4099)
    out = agg_loss(loss, mask, "token-mean", global_normalizer=4099)
    assert out.dtype == torch.float32 and float(out) == 1.0
