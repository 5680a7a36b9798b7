"""Rank splitting from tags only: equal counts, balanced lengths, whole groups."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.trainer.controller.balance import (
    balanced_equal_partition,
    balanced_group_partition,
    group_partition,
)


def test_equal_partition_balances_lengths():
    lengths = [100, 1, 1, 1, 50, 50, 2, 2]
    parts = balanced_equal_partition(lengths, 2)
    assert sorted(len(p) for p in parts) == [4, 4]
    loads = [sum(lengths[i] for i in p) for p in parts]
    # 100 goes with the short ones, both 50s together: 104 vs 103 (the total is odd)
    assert sorted(loads) == [103, 104]


@given(st.lists(st.integers(1, 4096), min_size=0, max_size=200), st.integers(1, 8))
@settings(max_examples=200, deadline=None)
def test_equal_partition_is_a_partition_with_equal_counts(lengths, parts):
    out = balanced_equal_partition(lengths, parts)
    flat = sorted(i for p in out for i in p)
    assert flat == list(range(len(lengths)))
    sizes = [len(p) for p in out]
    assert max(sizes) - min(sizes) <= 1


@given(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=100), st.integers(1, 4))
@settings(max_examples=200, deadline=None)
def test_group_partition_keeps_groups_whole(groups, parts):
    out = group_partition(groups, parts)
    flat = sorted(i for p in out for i in p)
    assert flat == list(range(len(groups)))
    owner = {}
    for rank, part in enumerate(out):
        for i in part:
            assert owner.setdefault(groups[i], rank) == rank


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(1, 64)), min_size=1,
                max_size=100), st.integers(1, 4))
@settings(max_examples=200, deadline=None)
def test_balanced_group_partition_keeps_groups_whole(samples, parts):
    groups, lengths = [g for g, _ in samples], [n for _, n in samples]
    out = balanced_group_partition(groups, lengths, parts)
    assert sorted(i for p in out for i in p) == list(range(len(groups)))
    owner = {}
    for rank, part in enumerate(out):
        assert part == sorted(part)  # batch order within a shard
        for i in part:
            assert owner.setdefault(groups[i], rank) == rank


def test_balanced_group_partition_balances_counts_then_lengths():
    # 8 groups of 4 samples; group g's samples are g+1 tokens long (loads 4, 8, ..., 32)
    groups = [f"g{g}" for g in range(8) for _ in range(4)]
    lengths = [g + 1 for g in range(8) for _ in range(4)]
    out = balanced_group_partition(groups, lengths, 2)
    assert [len(p) for p in out] == [16, 16]  # equal rows: no rank pads
    loads = sorted(sum(lengths[i] for i in p) for p in out)
    assert loads == [72, 72]  # 144 tokens, split evenly
    # uneven groups: the counts come first (FSDP ranks pad to the largest shard)
    out = balanced_group_partition(["a"] * 6 + ["b"] * 3 + ["c"] * 3, [1] * 6 + [9] * 6, 2)
    assert sorted(len(p) for p in out) == [6, 6]


def test_balanced_group_partition_ignores_the_uid_text():
    """uids are random: the split depends on the batch's order, never on their spelling."""
    lengths = [3, 3, 5, 5, 3, 3, 5, 5]
    first = balanced_group_partition(list("aabbccdd"), lengths, 2)
    assert balanced_group_partition(list("zzyyxxww"), lengths, 2) == first


# ---------------------------------------------------------------------------------------------
# The vectorised splits compute exactly what the plain item-by-item greedy computes (what
# balance.py did before it had to handle a million samples): that greedy is the oracle here.
def _greedy_equal(lengths, parts):
    import heapq

    base, extra = divmod(len(lengths), parts)
    capacity = [base + (1 if p < extra else 0) for p in range(parts)]
    heap = [(0, p) for p in range(parts)]
    out = [[] for _ in range(parts)]
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
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


def _greedy_group(groups, lengths, parts):
    import heapq
    from collections import defaultdict

    members, loads = defaultdict(list), defaultdict(int)
    for i, (g, length) in enumerate(zip(groups, lengths, strict=True)):
        members[g].append(i)
        loads[g] += length
    heap = [(0, 0, p) for p in range(parts)]
    out = [[] for _ in range(parts)]
    for g in sorted(members, key=lambda g: (-len(members[g]), -loads[g], members[g][0])):
        count, load, p = heapq.heappop(heap)
        out[p].extend(members[g])
        heapq.heappush(heap, (count + len(members[g]), load + loads[g], p))
    return [sorted(part) for part in out]


# thresholds of balance.py: its defaults, everything vectorised, every group by the heap
_EVERY_PATH = [{"RUN_MIN": 48, "LEVEL_MIN": 8}, {"RUN_MIN": 1, "LEVEL_MIN": 1},
               {"RUN_MIN": 2, "LEVEL_MIN": 10**9}]


@given(st.lists(st.integers(0, 12), max_size=300), st.integers(1, 40),
       st.sampled_from(_EVERY_PATH))
@settings(max_examples=300, deadline=None)
def test_equal_partition_is_the_plain_greedy(lengths, parts, thresholds):
    from unittest import mock

    from rlctl.trainer.controller import balance

    with mock.patch.multiple(balance, **thresholds):
        assert balanced_equal_partition(lengths, parts) == _greedy_equal(lengths, parts)


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 9)), max_size=300),
       st.integers(1, 40), st.sampled_from(_EVERY_PATH))
@settings(max_examples=300, deadline=None)
def test_group_partition_is_the_plain_greedy(samples, parts, thresholds):
    from unittest import mock

    from rlctl.trainer.controller import balance

    groups, lengths = [f"u{g}" for g, _ in samples], [n for _, n in samples]
    with mock.patch.multiple(balance, **thresholds):
        assert balanced_group_partition(groups, lengths, parts) == _greedy_group(
            groups, lengths, parts)


def test_large_steps_split_as_the_plain_greedy():
    """Thousands of samples over many ranks: long runs of equal lengths and whole levels of
    ranks, the shapes a million-sample step has (floats take the item-by-item path)."""
    import random

    rng = random.Random(0)
    lengths = [rng.choice([64, 128, 512, 2048, 4096]) + rng.randint(0, 3) for _ in range(20000)]
    groups = [f"u{i // 8}" for i in range(len(lengths))]
    assert balanced_equal_partition(lengths, 64) == _greedy_equal(lengths, 64)
    assert balanced_group_partition(groups, lengths, 64) == _greedy_group(groups, lengths, 64)
    ragged = [f"u{i // rng.choice([4, 8])}" for i in range(5000)]  # groups of several sizes
    assert balanced_group_partition(ragged, lengths[:5000], 16) == _greedy_group(
        ragged, lengths[:5000], 16)
    floats = [x / 7 for x in lengths[:3000]]
    assert balanced_equal_partition(floats, 16) == _greedy_equal(floats, 16)
    assert balanced_group_partition(groups[:3000], floats, 16) == _greedy_group(
        groups[:3000], floats, 16)


def test_bad_lengths_are_refused():
    import pytest

    with pytest.raises(ValueError, match="parts"):
        balanced_equal_partition([1, 2], 0)
    with pytest.raises(ValueError, match="2 groups but 1 lengths"):
        balanced_group_partition(["a", "b"], [1], 2)
    with pytest.raises(TypeError, match="numbers"):
        balanced_equal_partition(["long", "short"], 2)


def test_group_numbers_follow_runs_of_any_objects():
    """The split numbers groups by runs of equal neighbours: the same result (the plain
    greedy's) whether a group's items are one object or equal copies, and whether its items
    are together (as a sampled step lists them) or split over several runs."""
    import itertools
    import pickle
    import random

    rng = random.Random(7)
    uids = [f"u{g:04d}" for g in range(600)]
    for case in range(3):
        sizes = [rng.choice([1, 4, 8]) for _ in uids]
        groups = [u for u, n in zip(uids, sizes, strict=True) for _ in range(n)]
        if case >= 1:  # equal copies, each its own object (tags put one at a time)
            groups = [pickle.loads(pickle.dumps(g)) for g in groups]
        if case == 2:  # a group's items split over runs: shuffled in blocks of up to 3
            cuts = [0]
            while cuts[-1] < len(groups):
                cuts.append(cuts[-1] + rng.randint(1, 3))
            blocks = [groups[a:b] for a, b in itertools.pairwise(cuts)]
            rng.shuffle(blocks)
            groups = [g for b in blocks for g in b]
        lengths = [rng.randint(1, 4096) for _ in groups]
        for parts in (1, 7, 64):
            assert balanced_group_partition(groups, lengths, parts) == _greedy_group(
                groups, lengths, parts)
