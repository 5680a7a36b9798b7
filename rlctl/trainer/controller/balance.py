"""Splitting a step's keys across ranks using tags only (metadata, never tensors).

FSDP ranks run collectives in every forward, so each rank must get the same number of
samples (the same number of micro-batches); within that constraint the sum of ``seq_len``
tags is balanced so no rank waits on a long tail.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Sequence


def balanced_equal_partition(lengths: Sequence[int], parts: int) -> list[list[int]]:
    """Indices split into ``parts`` lists of equal size (±1) with balanced length sums.

    Greedy longest-first: each item goes to the lightest part that still has room. This is
    within a few percent of optimal for the step sizes we see and costs O(n log n).
    """
    n = len(lengths)
    if parts <= 0:
        raise ValueError("parts must be positive")
    base, extra = divmod(n, parts)
    capacity = [base + (1 if p < extra else 0) for p in range(parts)]
    heap = [(0, p) for p in range(parts)]  # (load, part)
    out: list[list[int]] = [[] for _ in range(parts)]
    order = sorted(range(n), key=lambda i: (-lengths[i], i))
    for i in order:
        skipped = []
        while True:
            load, p = heapq.heappop(heap)
            if len(out[p]) < capacity[p]:
                break
            skipped.append((load, p))
        out[p].append(i)
        heapq.heappush(heap, (load + lengths[i], p))
        for item in skipped:
            heapq.heappush(heap, item)
    return [sorted(part) for part in out]


def balanced_group_partition(
    groups: Sequence[str], lengths: Sequence[int], parts: int
) -> list[list[int]]:
    """Indices split so every group (uid) lands whole in one part: parts balanced by sample
    count first (FSDP ranks pad to the largest part), then by their ``lengths`` sums.

    Greedy largest-first over groups, each to the part with the fewest samples (the lighter
    one among equals); ties break by the group's first index, so the split depends on the
    batch's order only, never on the uids' (random) text.
    """
    if parts <= 0:
        raise ValueError("parts must be positive")
    members: dict[str, list[int]] = defaultdict(list)
    loads: dict[str, int] = defaultdict(int)
    for i, (g, length) in enumerate(zip(groups, lengths, strict=True)):
        members[g].append(i)
        loads[g] += length
    heap = [(0, 0, p) for p in range(parts)]  # (samples, load, part)
    out: list[list[int]] = [[] for _ in range(parts)]
    for g in sorted(members, key=lambda g: (-len(members[g]), -loads[g], members[g][0])):
        count, load, p = heapq.heappop(heap)
        out[p].extend(members[g])
        heapq.heappush(heap, (count + len(members[g]), load + loads[g], p))
    return [sorted(part) for part in out]


def group_partition(groups: Sequence[str], parts: int) -> list[list[int]]:
    """Indices split so every group (uid) lands whole in one part, parts balanced by count."""
    return balanced_group_partition(groups, [0] * len(groups), parts)
