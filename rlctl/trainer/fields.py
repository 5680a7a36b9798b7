"""Converting between the data plane's jagged per-sample fields and engines' padded [B, R].

Lengths come from the ``response_len`` / ``prompt_len`` tags, so no tensor has to travel to
find out how long a sample is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def mask_from_lengths(lengths: Sequence[int], width: int | None = None) -> Any:
    """[B, R] float mask, 1 where position < length."""
    import torch

    lens = torch.as_tensor(list(lengths), dtype=torch.long)
    width = int(lens.max().item()) if width is None else width
    return (torch.arange(width).unsqueeze(0) < lens.unsqueeze(1)).float()


def to_padded(value: Any, lengths: Sequence[int], pad: float = 0.0) -> Any:
    """A jagged nested tensor / list of 1-D tensors / dense [B, T] -> right-padded [B, max(lengths)]."""
    import torch

    width = max(lengths) if lengths else 0
    if isinstance(value, torch.Tensor) and not value.is_nested:
        if value.dim() == 1:
            return value
        out = value[:, :width].clone()
        if out.shape[1] < width:
            out = torch.nn.functional.pad(out, (0, width - out.shape[1]), value=pad)
        return out
    rows = list(value.unbind()) if isinstance(value, torch.Tensor) else list(value)
    out = torch.full((len(rows), width), pad, dtype=rows[0].dtype if rows else torch.float32)
    for i, (row, n) in enumerate(zip(rows, lengths, strict=True)):
        out[i, :n] = row[:n]
    return out


def to_jagged(padded: Any, lengths: Sequence[int]) -> Any:
    """[B, R] padded -> jagged nested tensor of rows ``padded[i, :lengths[i]]`` (no padding stored)."""
    import torch

    return torch.nested.as_nested_tensor(
        [padded[i, : int(n)].contiguous() for i, n in enumerate(lengths)], layout=torch.jagged
    )


def tag_column(tags: Sequence[dict], name: str) -> list[Any]:
    missing = [i for i, t in enumerate(tags) if name not in t]
    if missing:
        raise KeyError(f"tag {name!r} missing on {len(missing)} sample(s), e.g. index {missing[0]}")
    return [t[name] for t in tags]
