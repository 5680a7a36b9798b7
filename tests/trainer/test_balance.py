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
