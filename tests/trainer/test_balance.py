"""Rank splitting from tags only: equal counts, balanced lengths, whole groups."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.trainer.controller.balance import balanced_equal_partition, group_partition


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
