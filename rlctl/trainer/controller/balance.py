"""Splitting a step's keys across ranks using tags only (metadata, never tensors).

FSDP ranks run collectives in every forward, so each rank must get the same number of
samples (the same number of micro-batches); within that constraint the sum of ``seq_len``
tags is balanced so no rank waits on a long tail.

Both splits are greedy (each item, longest first, to the lightest part) and must stay cheap
at a million samples over a thousand ranks, where one heap operation per item in Python
takes seconds. They compute exactly what that item-by-item greedy computes, a group of
choices at a time with numpy (the derivations are in each helper):

* equal counts: the items of equal length (a *run*: many, at a million samples) are placed
  at once, by listing the candidate loads each part would take on and taking the smallest;
* whole groups: groups of one size are placed one *level* (all parts with the fewest
  samples) at a time, since every part of a level is chosen before any other part.

Short runs and ragged levels go item by item through a heap, as the plain greedy does.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from rlctl.protocol.kv import KVBatchMeta

RUN_MIN = 48  # equal lengths placed at once from this many on; fewer go through the heap
LEVEL_MIN = 8  # a level of fewer parts than this: the rest of its block goes through the heap


def seq_lengths(batch: KVBatchMeta) -> np.ndarray:
    """The ``seq_len`` tag of every sample, as int64 ``[len(batch)]`` (what both splits
    weigh by). Read straight into the array: at a million samples each tag's int object is a
    cache miss, paid once here rather than again when a split converts a list."""
    return np.fromiter(map(int, batch.tag_values("seq_len")), dtype=np.int64, count=len(batch))


def balanced_equal_partition(lengths: Sequence[int], parts: int) -> list[list[int]]:
    """Indices split into ``parts`` lists of equal size (±1) with balanced length sums.

    Greedy longest-first: each item goes to the lightest part that still has room (ties: the
    lower part number; equal lengths: the lower index first). This is within a few percent
    of optimal for the step sizes we see and costs O(n log n).
    """
    if parts <= 0:
        raise ValueError("parts must be positive")
    lens = _numbers(lengths)
    n = len(lens)
    if n == 0:
        return [[] for _ in range(parts)]
    base, extra = divmod(n, parts)
    room = np.full(parts, base, dtype=np.int64)
    room[:extra] += 1
    order = _stable_order(-lens)  # longest first, ties in index order
    part_of = np.empty(n, dtype=np.int64)
    loads = np.zeros(parts, dtype=lens.dtype)
    sorted_lens = lens[order]
    cuts = np.flatnonzero(sorted_lens[1:] != sorted_lens[:-1]) + 1
    starts, ends = np.r_[0, cuts].tolist(), np.r_[cuts, n].tolist()
    exact_levels = lens.dtype.kind == "i"  # the level arithmetic needs integer lengths
    heap: _EqualHeap | None = None
    for start, end in zip(starts, ends, strict=True):
        length = sorted_lens[start]
        if exact_levels and end - start >= RUN_MIN and length > 0:
            if heap is not None:
                heap.store(loads, room)
                heap = None
            _place_run(order[start:end], int(length), loads, room, part_of)
        else:
            heap = heap or _EqualHeap(loads, room)
            heap.place(order[start:end].tolist(), length.item(), part_of)
    return _members(part_of, parts)


class _EqualHeap:
    """The plain greedy, item by item: ``(load, part)`` of every part with room."""

    def __init__(self, loads: np.ndarray, room: np.ndarray) -> None:
        self.room = room.tolist()
        self.heap = [(load, p) for p, load in enumerate(loads.tolist()) if self.room[p] > 0]
        heapq.heapify(self.heap)

    def place(self, items: list[int], length: float, part_of: np.ndarray) -> None:
        heap, room = self.heap, self.room
        chosen = []
        for _ in items:
            load, p = heap[0]
            chosen.append(p)
            room[p] -= 1
            if room[p]:
                heapq.heapreplace(heap, (load + length, p))
            else:  # full for good: it never comes back, so it leaves the heap
                heapq.heappop(heap)
        part_of[items] = chosen

    def store(self, loads: np.ndarray, room: np.ndarray) -> None:
        """Hand the state back to the arrays (a full part's load no longer matters)."""
        room[:] = self.room
        if self.heap:
            held, ids = zip(*self.heap, strict=True)
            loads[list(ids)] = held


def _place_run(
    items: np.ndarray, length: int, loads: np.ndarray, room: np.ndarray, part_of: np.ndarray
) -> None:
    """Place ``items`` (equal ``length`` > 0, index order) as the greedy would, at once.

    Item after item the greedy takes the part with the smallest ``(load, part)`` and adds
    ``length``, so part ``p`` offers the loads ``l_p + j*length`` (``j < room_p``) and the
    run takes the ``m`` smallest offers, in order. With ``l_p - min(l) = q_p*length + f_p``
    (``0 <= f_p < length``) an offer's load orders as ``(q_p + j, f_p, p)``: whole *levels*
    ``k = q_p + j`` first. Find the level ``k*`` where the count reaches ``m``; below it
    every offer is taken, at it the first ones by ``(f_p, p)``.
    """
    m = len(items)
    act = np.flatnonzero(room)
    width = len(loads)
    if m <= len(act) and _place_on_the_lightest(items, length, act, loads, room, part_of):
        return
    offset = loads[act]
    offset = offset - offset.min()
    level = offset // length
    cap = room[act]

    def taken_below(k: int) -> np.ndarray:  # offers at levels < k, per part
        return np.minimum(np.maximum(k - level, 0), cap)

    top = _first_level_reaching(lambda k: int(taken_below(k + 1).sum()), m)
    take = taken_below(top)
    # At the top level the offers order by (fraction, part), i.e. by (load, part): one key.
    at_top = np.flatnonzero((level <= top) & (top < level + cap))
    ranked = at_top[np.argsort((offset[at_top] - level[at_top] * length) * width + act[at_top])]
    take[ranked[: m - int(take.sum())]] += 1
    # The picks in the greedy's order: by the load each offer stands at, then part.
    who = np.repeat(np.arange(len(act)), take)
    nth = np.arange(m) - np.repeat(np.cumsum(take) - take, take)
    seq = who[np.argsort((offset[who] + nth * length) * width + act[who])]
    part_of[items] = act[seq]
    loads[act] += take * length
    room[act] -= take


def _place_on_the_lightest(
    items: np.ndarray,
    length: int,
    act: np.ndarray,
    loads: np.ndarray,
    room: np.ndarray,
    part_of: np.ndarray,
) -> bool:
    """The common case of :func:`_place_run`, in a third of its numpy calls: when the ``m``
    lightest parts span less than ``length`` (the lightest part's second offer comes after
    the ``m``-th part's first), each of them takes one item, lightest first. False (nothing
    placed) otherwise."""
    m = len(items)
    key = loads[act] * len(loads) + act  # orders as (load, part): every key is distinct
    lightest = np.argpartition(key, m - 1)[:m] if m < len(act) else np.arange(len(act))
    lightest = lightest[np.argsort(key[lightest])]
    first, last = act[lightest[0]], act[lightest[-1]]
    if m > 1 and (loads[first] + length, first) < (loads[last], last):
        return False
    chosen = act[lightest]
    part_of[items] = chosen
    loads[chosen] += length
    room[chosen] -= 1
    return True


def _first_level_reaching(count_to, m: int) -> int:
    """The least ``k >= 0`` with ``count_to(k) >= m`` (``count_to`` grows with ``k``)."""
    lo, hi = -1, 0
    while count_to(hi) < m:  # gallop: levels needed are usually few
        lo, hi = hi, 2 * hi + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count_to(mid) >= m:
            hi = mid
        else:
            lo = mid
    return hi


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
    lens = _numbers(lengths)
    if len(groups) != len(lens):
        raise ValueError(f"{len(groups)} groups but {len(lens)} lengths")
    if not len(groups):
        return [[] for _ in range(parts)]
    ids, count = _group_numbers(groups)
    sizes = np.bincount(ids, minlength=count)
    # Summed in index order, like the plain greedy's running sums (exact for ints < 2**53).
    group_loads = np.bincount(ids, weights=lens, minlength=count).astype(lens.dtype)
    order = np.lexsort((np.arange(count), -group_loads, -sizes))
    part_of_group = np.empty(count, dtype=np.int64)
    counts = np.zeros(parts, dtype=np.int64)
    loads = np.zeros(parts, dtype=lens.dtype)
    sorted_sizes = sizes[order]
    cuts = np.flatnonzero(sorted_sizes[1:] != sorted_sizes[:-1]) + 1
    for start, end in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(order)].tolist(), strict=True):
        block = order[start:end]
        _place_block(block, int(sorted_sizes[start]), group_loads[block], counts, loads,
                     part_of_group)
    return _members(part_of_group[ids], parts)


def _group_numbers(groups: Sequence[str]) -> tuple[np.ndarray, int]:
    """Each item's group number (int64, ``[len(groups)]``), groups numbered in order of first
    appearance (a group's number orders its first index), and how many groups there are.

    A step's batch lists a group's samples one after another (the ReplayBuffer orders them by
    uid and hands one string object per uid), so only the first item of each run of equal
    groups is looked up in a dict: at a million samples, hashing every item cost most of the
    split. Neighbours are compared by one numpy comparison of the items (a pointer test where
    they are the same object). Any order gives the same numbers; a group split over several
    runs is looked up once per run.
    """
    items = np.fromiter(groups, dtype=object, count=len(groups))  # [n] the group objects
    heads = np.flatnonzero(np.r_[True, items[1:] != items[:-1]])  # [runs] where a run starts
    head_groups = items[heads].tolist()
    numbering = dict.fromkeys(head_groups)  # first appearance order
    for number, group in enumerate(numbering):
        numbering[group] = number
    run_numbers = np.fromiter(map(numbering.__getitem__, head_groups), dtype=np.int64,
                              count=len(heads))
    return np.repeat(run_numbers, np.diff(np.r_[heads, len(items)])), len(numbering)


def _place_block(
    block: np.ndarray,
    size: int,
    block_loads: np.ndarray,
    counts: np.ndarray,
    loads: np.ndarray,
    part_of_group: np.ndarray,
) -> None:
    """Place groups of one ``size`` (in greedy order) on the part with the least
    ``(count, load, part)`` each.

    Every part holding the fewest samples (a *level*) is chosen before any other: choosing
    one moves it ``size`` up, above the rest of its level, and nothing else changes their
    loads meanwhile. So a level takes its next groups in one go, its parts ordered by
    ``(load, part)``. Levels of a few parts (ragged counts) go through a heap instead.
    """
    pos = 0
    while pos < len(block):
        level = np.flatnonzero(counts == counts.min())
        if len(level) < LEVEL_MIN and len(block) - pos > len(level):
            _place_by_heap(block[pos:], size, block_loads[pos:], counts, loads, part_of_group)
            return
        take = min(len(level), len(block) - pos)
        ranked = level[np.lexsort((level, loads[level]))][:take]
        part_of_group[block[pos:pos + take]] = ranked
        counts[ranked] += size
        loads[ranked] += block_loads[pos:pos + take]
        pos += take


def _place_by_heap(
    block: np.ndarray,
    size: int,
    block_loads: np.ndarray,
    counts: np.ndarray,
    loads: np.ndarray,
    part_of_group: np.ndarray,
) -> None:
    heap = list(zip(counts.tolist(), loads.tolist(), range(len(counts)), strict=True))
    heapq.heapify(heap)
    chosen = []
    for load in block_loads.tolist():
        count, held, p = heap[0]
        chosen.append(p)
        heapq.heapreplace(heap, (count + size, held + load, p))
    part_of_group[block] = chosen
    for count, held, p in heap:
        counts[p], loads[p] = count, held


def group_partition(groups: Sequence[str], parts: int) -> list[list[int]]:
    """Indices split so every group (uid) lands whole in one part, parts balanced by count."""
    return balanced_group_partition(groups, [0] * len(groups), parts)


def _numbers(lengths: Sequence[int]) -> np.ndarray:
    """``lengths`` as int64 (or float64 when any is fractional)."""
    arr = np.asarray(lengths)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "biuf"):
        raise TypeError(f"lengths must be a flat sequence of numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64 if arr.dtype.kind == "f" else np.int64)


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """``argsort(keys, kind="stable")``; keys spanning under 2**16 values sort as uint16,
    for which numpy's stable sort is a radix sort (5x faster at a million)."""
    if keys.dtype.kind == "i" and len(keys):
        low = keys.min()
        if keys.max() - low < 1 << 16:
            keys = (keys - low).astype(np.uint16)
    return np.argsort(keys, kind="stable")


def _members(part_of: np.ndarray, parts: int) -> list[list[int]]:
    """Per part, its indices in ascending order."""
    by_part = _stable_order(part_of)  # ascending index within each part
    bounds = np.cumsum(np.bincount(part_of, minlength=parts))[:-1]
    return [chunk.tolist() for chunk in np.split(by_part, bounds)]
