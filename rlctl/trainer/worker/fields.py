"""Converting between the data plane's jagged per-sample fields and engines' padded [B, R].

Per-row indexing of a nested tensor dispatches through torch's nested-tensor machinery (about
a millisecond per row); these helpers work on the packed ``values`` / ``offsets`` instead.
Lengths come from the ``response_len`` / ``prompt_len`` tags, so no tensor has to travel to
find out how long a sample is.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, pairwise
from typing import Any

from rlctl.dataplane import jagged


def mask_from_lengths(lengths: Sequence[int], width: int | None = None) -> Any:
    """[B, R] float mask, 1 where position < length."""
    import torch

    lens = torch.as_tensor(list(lengths), dtype=torch.long)
    width = int(lens.max().item()) if width is None else width
    return (torch.arange(width).unsqueeze(0) < lens.unsqueeze(1)).float()


def generated_lengths(meta: Any) -> list[int]:
    """Tokens the policy generated per sample (``loss_tokens``; observations not counted)."""
    return [int(t.get("loss_tokens", t["response_len"])) for t in meta.tags]


def loss_mask_of(td: Any, lengths: Sequence[int], width: int) -> Any:
    """``[B, width]`` float loss mask (1 = generated, 0 = observation or padding)."""
    import torch

    mask = to_padded(td["loss_mask"], lengths).float()
    if mask.shape[1] < width:  # every response empty: the batch still has one column
        mask = torch.nn.functional.pad(mask, (0, width - mask.shape[1]))
    return mask


def rows(value: Any) -> list[Any]:
    """The per-sample 1-D tensors of a jagged field (views into one buffer, no NT ops)."""
    values, offsets = jagged.unpack(value)
    bounds = offsets.tolist()
    return [values[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]


def flat(value: Any) -> tuple[Any, list[int]]:
    """A jagged field as ``(values [N], lengths per sample)``: its rows back to back."""
    values, offsets = jagged.unpack(value)
    bounds = offsets.tolist()
    return values[bounds[0] : bounds[-1]], [b - a for a, b in pairwise(bounds)]


def to_padded(value: Any, lengths: Sequence[int], pad: float = 0.0) -> Any:
    """A jagged field -> right-padded ``[B, max(lengths)]``; dense ``[B, T]`` is cut/padded."""
    import torch

    width = max(lengths) if lengths else 0
    if jagged.is_jagged(value):
        values, offsets = jagged.unpack(value)
        padded, _ = jagged.padded_from_values(values, offsets - offsets[0], pad)
        value = padded
    if value.dim() == 1:
        return value
    out = value[:, :width]
    if out.shape[1] < width:
        out = torch.nn.functional.pad(out, (0, width - out.shape[1]), value=pad)
    return out


def to_jagged(padded: Any, lengths: Sequence[int]) -> Any:
    """[B, R] padded -> jagged rows ``padded[i, :lengths[i]]`` (no padding stored)."""
    import torch

    return jagged.from_padded(
        padded.contiguous(), torch.as_tensor(list(lengths), dtype=torch.int64)
    )


def from_rows(items: Sequence[Sequence[float]], dtype: Any) -> Any:
    """Jagged field from Python lists (one list per sample), built in one copy: the rows are
    chained into one list and converted once (a tensor per row cost ~10 us each)."""
    import torch

    values = torch.tensor(list(chain.from_iterable(items)), dtype=dtype)  # [N]
    return jagged.from_values(values, [len(x) for x in items])


def non_tensor_column(td: Any, key: str) -> list[Any]:
    """A non-tensor per-sample field (strings, JSON) as a list."""
    value = td.get(key)
    if hasattr(value, "tolist"):
        return list(value.tolist())
    return list(value)
