"""Masked reductions over [B, T] tensors, with verl's exact definitions.

Values outside the mask may be garbage (padding, NaN from a prompt position): every
reduction selects with ``torch.where`` first so they never leak into a sum.
"""

from __future__ import annotations

import torch


def masked_sum(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sum of ``values`` where ``mask`` is non-zero (over all elements, or along ``dim``)."""
    selected = torch.where(mask.bool(), values, torch.zeros_like(values))
    weighted = selected * mask.to(values.dtype)
    return weighted.sum() if dim is None else weighted.sum(dim=dim)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``values`` under ``mask``; an empty mask gives 0 (verl adds 1e-8 to the count)."""
    count = mask.sum() if dim is None else mask.sum(dim=dim)
    return masked_sum(values, mask, dim) / (count.to(values.dtype) + 1e-8)


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance of the masked elements, with Bessel's correction by default (as verl).

    Raises when fewer than two elements are selected: the unbiased variance is undefined
    there and dividing by zero would silently turn every advantage into NaN.
    """
    mean = masked_mean(values, mask)
    variance = masked_mean((values - mean) ** 2, mask)
    if unbiased:
        count = mask.sum()
        if count < 2:
            raise ValueError(
                f"masked variance needs at least 2 unmasked tokens, got {int(count)}: whitening "
                "a batch this small is undefined; use a larger batch (more prompts or samples)"
            )
        variance = variance * (count / (count - 1)).to(values.dtype)
    return variance


def masked_whiten(
    values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True
) -> torch.Tensor:
    """Normalise ``values`` to zero mean and unit (unbiased) variance over the mask.

    ``(v - mean) * rsqrt(var + 1e-8)``; with ``shift_mean=False`` the mean is added back.
    Positions outside the mask are transformed too; callers multiply by the mask.
    """
    mean = masked_mean(values, mask)
    var = masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened = whitened + mean
    return whitened
