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
    assert p.lookahead == 0 and p.max_staleness == 0
    assert p.admit(5, policy_version=4)
    assert not p.admit(6, policy_version=4)
    assert p.evict([_g("a", 5, 4)], policy_version=4) == []
    assert p.evict([_g("a", 5, 3)], policy_version=4) == [_g("a", 5, 3)]


def test_bounded_wait_admits_k_ahead_and_evicts_past_k() -> None:
    p = Bounded(BoundedOptions(max_staleness=2))
    assert p.lookahead == 2 and p.max_staleness == 2
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


class PlainNewestFirst:
    """A policy written as a plain class from the documented contract (no rlctl base)."""

    lookahead = 1
    max_staleness = 1

    def __init__(self, options: object = None) -> None:
        pass

    def admit(self, dispatch_step: int, policy_version: int) -> bool:
        return dispatch_step - 1 - policy_version <= self.lookahead

    def evict(self, groups, policy_version):
        return [g for g in groups if g.staleness(policy_version) > self.max_staleness]

    def select(self, groups, count):
        return sorted(groups, key=lambda g: -g.dispatch_step)[:count]

    def state_dict(self):
        return {}

    def load_state_dict(self, state) -> None:
        pass


class NoSelect:
    lookahead = 1
    max_staleness = "one"

    def __init__(self, options: object = None) -> None:
        pass


def test_a_plain_class_with_the_documented_members_is_a_policy_and_a_lacking_one_is_named():
    from rlctl.algorithms.staleness import StalenessPolicyContract
    from rlctl.plugin_contracts import contract_problems

    assert contract_problems(PlainNewestFirst(), StalenessPolicyContract) == []
    assert isinstance(PlainNewestFirst(), StalenessPolicyContract)
    assert contract_problems(NoSelect(), StalenessPolicyContract) == [
        "max_staleness (an int; got 'one')", "admit()", "evict()", "select()",
        "state_dict()", "load_state_dict()"]


def test_a_policy_that_lacks_the_contract_is_refused_at_load_naming_it(load_with_policy):
    problems = load_with_policy(NoSelect)
    assert [p.path for p in problems] == ["algorithm.staleness.policy"]
    text = problems[0].message
    assert 'staleness policy "plain"' in text and "test_staleness.py:" in text
    assert "select()" in text and "StalenessPolicyContract" in problems[0].fix
    assert load_with_policy(PlainNewestFirst) == []


@pytest.fixture
def load_with_policy():
    import types

    from rlctl.config.pipeline import validate_recipe
    from rlctl.config.problems import ConfigError
    from rlctl.config.recipe import Recipe
    from rlctl.hookspecs import hookimpl
    from rlctl.registry import set_registry

    def load(cls):
        module = types.ModuleType("rlctl_test_plain_policy")

        @hookimpl
        def register_staleness_policies(register):
            register("plain", cls, description="a plain class")

        module.register_staleness_policies = register_staleness_policies
        set_registry(build_registry(extra=[module]))
        recipe = Recipe.model_validate({"data": {"task": "count_digits"},
                                        "algorithm": {"staleness": {"policy": "plain"}}})
        try:
            validate_recipe(recipe)
        except ConfigError as exc:
            return list(exc.problems)
        finally:
            set_registry(None)
        return []

    return load
