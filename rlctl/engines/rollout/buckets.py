"""Cut a state dict into buckets of about N bytes: how every server weight sync sends weights.

Both server syncs (``vllm``, ``sglang``) use it. Buckets keep the state dict's order, hold
contiguous CPU tensors, and are made one at a time, so a sync that sends bucket ``i`` before it
asks for bucket ``i + 1`` holds one bucket of copies in memory, not the whole model.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import torch

T = TypeVar("T")


def cpu_tensors(
    state_dict: Mapping[str, torch.Tensor], *, copy: bool = False
) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` as contiguous CPU tensors, tied (shared-storage) ones made separate.

    safetensors refuses tensors that share storage (a tied LM head and the embedding).
    ``copy=True`` gives every tensor fresh storage: a transport that moves storage into
    shared memory (SGLang's ``tensor``) must never move the actor's own parameters.
    """
    seen: set[int] = set()
    for name, tensor in state_dict.items():
        t = tensor.detach().to("cpu", copy=copy).contiguous()
        if t.data_ptr() in seen:
            t = t.clone()
        seen.add(t.data_ptr())
        yield name, t


def buckets(
    state_dict: Mapping[str, torch.Tensor], bucket_bytes: int, *, copy: bool = False
) -> Iterator[dict[str, torch.Tensor]]:
    """Consecutive groups of tensors of at most ``bucket_bytes`` (a larger tensor goes alone).

    ``copy`` as for :func:`cpu_tensors`.
    """
    bucket: dict[str, torch.Tensor] = {}
    size = 0
    for name, t in cpu_tensors(state_dict, copy=copy):
        nbytes = t.numel() * t.element_size()
        if bucket and size + nbytes > bucket_bytes:
            yield bucket
            bucket, size = {}, 0
        bucket[name] = t
        size += nbytes
    if bucket:
        yield bucket


def with_last(items: Iterable[T]) -> Iterator[tuple[T, bool]]:
    """``(item, is_last)`` for each item, one looked ahead (the last bucket carries the version)."""
    it = iter(items)
    try:
        previous = next(it)
    except StopIteration:
        return
    for item in it:
        yield previous, False
        previous = item
    yield previous, True
