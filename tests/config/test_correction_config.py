"""[algorithm.correction] in a recipe: typed, each knob tied to its method, the old
[algorithm.loss] tis_cap still read, and "auto" resolved against the staleness bound."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rlctl.algorithms.off_policy import OffPolicyCorrection, recipe_correction
from rlctl.config.problems import ConfigProblem
from tests.config.config_helpers import BASE

Problems = Callable[..., list[ConfigProblem]]
C = "algorithm.correction"
STREAM = ["algorithm.staleness.policy=bounded", "algorithm.staleness.options.max_staleness=1"]


def test_auto_is_none_in_sync_and_decoupled_ppo_when_streaming(load) -> None:  # type: ignore[no-untyped-def]
    assert recipe_correction(load(BASE)) == OffPolicyCorrection("none")
    assert recipe_correction(load(BASE, overrides=STREAM)) == OffPolicyCorrection(
        "decoupled_ppo", cap=5.0)


def test_each_method_loads_typed(load) -> None:  # type: ignore[no-untyped-def]
    loaded = load(BASE + f'[{C}]\nmethod = "masked_is"\nlow = 0.25\nhigh = 4.0\n'
                  'level = "sequence"\n', overrides=STREAM)
    assert recipe_correction(loaded) == OffPolicyCorrection("masked_is", low=0.25, high=4.0,
                                                            level="sequence")
    loaded = load(BASE, overrides=[f"{C}.method=truncated_is", f"{C}.cap=3.0"])
    assert recipe_correction(loaded) == OffPolicyCorrection("truncated_is", cap=3.0)


@pytest.mark.parametrize(("overrides", "path", "words"), [
    ([f"{C}.method=none", f"{C}.cap=2.0"], f"{C}.cap", "cap applies to method"),
    ([f"{C}.cap=2.0"], f"{C}.cap", "not 'auto'"),
    ([f"{C}.method=decoupled_ppo", f"{C}.low=0.1"], f"{C}.low", "low applies to method"),
    ([f"{C}.method=truncated_is", f"{C}.level=sequence"], f"{C}.level", "level applies"),
    ([f"{C}.method=decoupled_ppo", f"{C}.cap=0.9"], f"{C}.cap", "masks the weights above cap"),
    ([f"{C}.method=masked_is", f"{C}.low=2.0", f"{C}.high=1.0"], f"{C}.low", "low, high"),
    ([f"{C}.method=importance"], f"{C}.method", "is not allowed"),
])
def test_misplaced_or_contradicting_knobs_name_the_key(problems: Problems, overrides, path,
                                                       words) -> None:
    (p,) = problems(BASE, overrides=overrides)
    assert p.path == path
    assert words in p.message, p.message
    assert p.fix


def test_streaming_runs_with_dynamic_sampling_and_reward_models(load) -> None:  # type: ignore[no-untyped-def]
    """One rollout producer serves both: nothing is refused (the runs are in tests/trainer)."""
    rm = ('[[rewards]]\nname = "digits_match"\n\n[[rewards]]\nname = "reward_model"\n'
          'options = { path = "/rm" }\n')
    loaded = load(BASE + rm, overrides=[*STREAM, "algorithm.dynamic_sampling.enabled=true"])
    assert loaded.recipe.algorithm.dynamic_sampling.enabled
