"""Every shipped recipe validates, says how to run it, and round-trips through `config show`."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from rlctl.config.pipeline import load_recipe
from rlctl.config.recipe import Recipe
from rlctl.registry import Registry
from tests.config.config_helpers import RECIPES


def test_the_shipped_recipes_are_there() -> None:
    assert {p.name for p in RECIPES} >= {"qwen3_grpo.toml", "qwen3_ppo_gae.toml", "tiny_grpo.toml"}


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_shipped_recipe_validates(path: Path, registry: Registry) -> None:
    loaded = load_recipe([path], env={}, registry=registry)
    assert loaded.files == (str(path),)


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_shipped_recipe_header_gives_the_exact_command(path: Path) -> None:
    header = path.read_text().split("\n[", 1)[0]
    assert f"rlctl train recipes/{path.name}" in header
    assert "-s " in header  # an override example


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_config_show_output_is_the_same_recipe(path: Path, registry: Registry) -> None:
    loaded = load_recipe([path], env={}, registry=registry)
    for text in (loaded.to_toml(), loaded.to_toml(with_sources=True)):
        assert Recipe.model_validate(tomllib.loads(text)) == loaded.recipe


def test_cpu_default_recipe_selects_the_cpu_stack(registry: Registry) -> None:
    r = load_recipe([Path("recipes/tiny_grpo.toml").resolve()], env={}, registry=registry).recipe
    assert (r.model.path, r.model.dtype, r.data.task) == ("tiny", "float32", "count_digits")
    assert [x.name for x in r.rewards] == ["digits_match"]
    assert (r.engines.train.backend, r.engines.train.ranks, r.engines.rollout.backend) == (
        "fsdp", 2, "hf")
    assert (r.data_plane.backend, r.resources.mode) == ("ray", "ray")


def test_gpu_recipes_select_the_gpu_stack(registry: Registry) -> None:
    grpo = load_recipe([Path("recipes/qwen3_grpo.toml").resolve()], env={},
                       registry=registry).recipe
    ppo = load_recipe([Path("recipes/qwen3_ppo_gae.toml").resolve()], env={},
                      registry=registry).recipe
    for r in (grpo, ppo):
        assert r.model.path.startswith("Qwen/Qwen3-")
        assert (r.engines.train.backend, r.engines.rollout.backend, r.data_plane.backend) == (
            "fsdp", "vllm", "transferqueue")
        assert r.resources.nodes * r.resources.devices_per_node == 8
    assert (grpo.algorithm.estimator, ppo.algorithm.estimator) == ("grpo", "gae")
    assert ppo.critic.enabled and not grpo.critic.enabled
