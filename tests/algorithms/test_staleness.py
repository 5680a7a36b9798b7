"""Staleness policies: admission, eviction and selection on group metadata."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rlctl.algorithms.staleness import Bounded, BoundedOptions, GroupState, OnPolicy
from rlctl.registry import build_registry


def _g(uid: str, step: int, lo: int, hi: int | None = None) -> GroupState:
    return GroupState(uid, step, lo, lo if hi is None else hi)


def test_on_policy_admits_only_the_training_step_and_is_not_streaming() -> None:
    p = OnPolicy()
    assert not p.streaming
    assert p.admit(5, policy_version=4)
    assert not p.admit(6, policy_version=4)
    assert p.evict([_g("a", 5, 4)], policy_version=4) == []
    assert p.evict([_g("a", 5, 3)], policy_version=4) == [_g("a", 5, 3)]


def test_bounded_wait_admits_k_ahead_and_evicts_past_k() -> None:
    p = Bounded(BoundedOptions(max_staleness=2))
    assert p.streaming and p.lookahead == 2
    assert [s for s in range(1, 10) if p.admit(s, policy_version=3)] == [1, 2, 3, 4, 5, 6]
    groups = [_g("a", 4, 3), _g("b", 4, 1, 3), _g("c", 4, 0, 2)]
    # staleness counts from the oldest weights that generated a token (min_version)
    assert [g.uid for g in p.evict(groups, policy_version=3)] == ["c"]


def test_bounded_drop_dispatches_one_step_further() -> None:
    p = Bounded(BoundedOptions(max_staleness=1, on_stale="drop"))
    assert p.lookahead == 2
    assert p.admit(4, policy_version=1) and not p.admit(5, policy_version=1)


def test_select_takes_whole_groups_oldest_dispatch_first() -> None:
    p = Bounded(BoundedOptions(max_staleness=1))
    groups = [_g("x", 3, 2), _g("y", 2, 1), _g("z", 3, 2), _g("w", 2, 2)]
    assert [g.uid for g in p.select(groups, 3)] == ["y", "w", "x"]


def test_wait_rejects_a_lookahead_past_the_bound() -> None:
    with pytest.raises(ValidationError, match="exceeds max_staleness"):
        BoundedOptions(max_staleness=1, lookahead=2)
    assert BoundedOptions(max_staleness=1, lookahead=3, on_stale="drop").lookahead == 3


def test_builtins_are_registered_with_their_options() -> None:
    reg = build_registry(external="none")
    assert reg.get("staleness_policy", "bounded").options is BoundedOptions
    assert reg.load("staleness_policy", "on_policy") is OnPolicy
