"""A reward's extra result components reach metrics.jsonl under its name, as the docs say:
``reward/<reward>/<component>``, for rule rewards (rollout workers) and for model rewards
(reward workers) alike (issue 30)."""

from __future__ import annotations

import types

import pytest

from rlctl.hookspecs import hookimpl
from rlctl.protocol.kv import KVBatchMeta
from rlctl.registry import build_registry, set_registry
from rlctl.trainer.worker.sessions import component_partials, is_reward_component


def length_parts(sample, **options):
    """A rule reward with components: the score and two numbers about the response."""
    n = len(sample.response_text)
    return {"score": 1.0 if n else 0.0, "chars": float(n), "long": float(n > 2)}


class ScorerWithParts:
    """A model reward (kind ``model``) whose results carry a component."""

    def __init__(self, options, device="cpu"):
        pass

    def __call__(self, samples):
        return [{"score": 0.5, "confidence": 0.25} for _ in samples]


@pytest.fixture
def component_rewards():
    module = types.ModuleType("rlctl_test_components")

    @hookimpl
    def register_reward_functions(register):
        register("length_parts", length_parts)
        register("scorer_parts", ScorerWithParts, kind="model")

    module.register_reward_functions = register_reward_functions
    set_registry(build_registry(external="none", extra=[module]))
    yield
    set_registry(None)


def test_components_are_the_names_below_a_rewards_own():
    assert is_reward_component("reward/llm_judge/parsed")
    assert not is_reward_component("reward/llm_judge") and not is_reward_component("agent/x")
    tags = [{"reward/r/a": 1.0, "reward/r": 3.0}, {"reward/r/a": 0.0}, {}]
    meta = KVBatchMeta(keys=["a", "b", "c"], partition_id="train", tags=tags)
    assert component_partials(meta) == {"reward/r/a": (1.0, 2.0, 0.0, 1.0)}


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_rule_and_model_reward_components_are_logged_per_step(component_rewards, make_recipe,
                                                              run):
    recipe = make_recipe(
        rewards=[{"name": "length_parts"}, {"name": "scorer_parts", "weight": 0.5}],
        schedule={"total_steps": 1},
    )
    [row] = run(recipe)
    assert row["reward/length_parts/chars"] > 0.0
    assert 0.0 <= row["reward/length_parts/long"] <= 1.0
    assert row["reward/scorer_parts/confidence"] == pytest.approx(0.25)
    assert row["reward/scorer_parts"] == pytest.approx(0.5)
    assert "reward/length_parts" in row  # the reward's own score, as before
