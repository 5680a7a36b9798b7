"""Helpers for variable-length per-sample fields (``torch.jagged`` nested tensors).

A jagged field of B samples is ``values [N, ...]`` (all samples' rows back to back) plus
``offsets [B+1]`` (sample ``i`` is ``values[offsets[i]:offsets[i+1]]``). These helpers move
between that form, lists of tensors and right-padded dense tensors without Python loops
over tokens.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from rlctl.dataplane.npbridge import concat


class _DropFxTracingNotice(logging.Filter):
    """torch 2.13's nested tensors call its deprecated ``is_fx_tracing`` on their first op,
    which logs a notice to use another function, once per process: in a training run, one
    ``[rankN]:W... is_fx_tracing will return true ...`` line per worker that nobody can act on.
    Only that message is dropped; the logger's other records pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("is_fx_tracing will return true")


logging.getLogger("torch.fx._symbolic_trace").addFilter(_DropFxTracingNotice())


def is_jagged(t: object) -> bool:
    """True for a ``torch.jagged`` nested tensor."""
    return isinstance(t, torch.Tensor) and t.is_nested and t.layout == torch.jagged


def from_list(rows: Sequence[torch.Tensor]) -> torch.Tensor:
    """A jagged nested tensor ``[B, j, ...]`` from B tensors ``[L_i, ...]`` (copies once)."""
    values, offsets = pack(rows)
    return torch.nested.nested_tensor_from_jagged(values, offsets)


def from_values(values: torch.Tensor, lengths: Sequence[int]) -> torch.Tensor:
    """A jagged nested tensor ``[B, j, ...]`` of ``values [N, ...]`` cut into rows of
    ``lengths`` (no copy)."""
    if not lengths:
        raise ValueError("cannot build a jagged field of zero rows")
    if sum(lengths) != values.shape[0]:
        raise ValueError(f"row lengths sum to {sum(lengths)} but there are "
                         f"{values.shape[0]} values")
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    torch.cumsum(torch.tensor(lengths, dtype=torch.int64), 0, out=offsets[1:])
    return torch.nested.nested_tensor_from_jagged(values, offsets)


def pack(rows: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values [N, ...], offsets [B+1] int64)`` from B tensors ``[L_i, ...]``."""
    if not rows:
        raise ValueError("cannot pack an empty list of rows")
    trailing = {tuple(r.shape[1:]) for r in rows}
    dtypes = {r.dtype for r in rows}
    if any(r.dim() == 0 for r in rows) or len(trailing) != 1 or len(dtypes) != 1:
        raise ValueError(
            "variable-length rows must all be tensors of shape [L_i, ...] with the same "
            f"trailing shape and dtype; got shapes {[tuple(r.shape) for r in rows[:4]]} "
            f"and dtypes {sorted(map(str, dtypes))}"
        )
    lengths = torch.tensor([r.shape[0] for r in rows], dtype=torch.int64)
    offsets = torch.zeros(len(rows) + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    return concat(list(rows)), offsets


def unpack(nt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values, offsets)`` of a jagged nested tensor, without copying when possible."""
    if not is_jagged(nt):
        raise TypeError("unpack expects a torch.jagged nested tensor")
    if nt._lengths is not None:  # a non-contiguous view (holes between rows): repack
        return pack(list(nt.unbind()))
    return nt.values(), nt.offsets().to(torch.int64)


def lengths(nt: torch.Tensor) -> torch.Tensor:
    """Per-sample lengths ``[B]`` (int64) of a jagged nested tensor."""
    _, offsets = unpack(nt)
    return offsets.diff()


def padded_from_values(
    values: torch.Tensor, offsets: torch.Tensor, pad_value: float = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad ``values [N, ...]`` / ``offsets [B+1]`` to ``([B, Lmax, ...], mask [B, Lmax])``."""
    lens = offsets.diff()
    batch = lens.numel()
    tmax = int(lens.max()) if batch else 0
    out = values.new_full((batch, tmax, *values.shape[1:]), pad_value)
    mask = torch.arange(tmax).unsqueeze(0) < lens.unsqueeze(1)  # [B, Lmax] bool
    # The mask's True cells, row by row, are the values in order: one masked copy.
    out[mask] = values[: int(offsets[-1]) - int(offsets[0])] if batch else values[:0]
    return out, mask


def to_padded(nt: torch.Tensor, pad_value: float = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(padded [B, Lmax, ...], mask [B, Lmax] bool)`` from a jagged nested tensor."""
    values, offsets = unpack(nt)
    start, end = int(offsets[0]), int(offsets[-1])
    return padded_from_values(values[start:end], offsets - start, pad_value)


def from_padded(padded: torch.Tensor, mask_or_lengths: torch.Tensor) -> torch.Tensor:
    """A jagged nested tensor from right-padded ``[B, T, ...]`` and a mask ``[B, T]`` or
    lengths ``[B]``."""
    lens = mask_or_lengths.sum(1) if mask_or_lengths.dim() == 2 else mask_or_lengths
    lens = lens.to(torch.int64)
    keep = torch.arange(padded.shape[1]).unsqueeze(0) < lens.unsqueeze(1)
    offsets = torch.zeros(lens.numel() + 1, dtype=torch.int64)
    torch.cumsum(lens, 0, out=offsets[1:])
    return torch.nested.nested_tensor_from_jagged(padded[keep], offsets)
