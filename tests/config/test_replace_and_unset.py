"""An overlay can replace a table (``_replace = true``) and ``-s ~key`` unsets a key
(issue 30: a base recipe's environment options deep-merged into another environment's)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rlctl.config.loading import resolve
from rlctl.config.pipeline import load_recipe
from rlctl.config.problems import ConfigError
from rlctl.config.recipe import Recipe

BASE = """
[data]
task = "guess_digit"
[algorithm]
group_size = 4
[algorithm.kl]
coef = 0.05
[rollout]
agent_loop = "env"
[rollout.environment]
name = "guess_digit"
[rollout.environment.options]
higher = "up"
lower = "down"
[[rewards]]
name = "env_reward"
"""

MERGING = """
[rollout.environment.options]
invalid = "bad"
"""

REPLACING = """
[rollout.environment.options]
_replace = true
invalid = "bad"
"""


def test_an_overlay_table_merges_by_default(write: Callable[..., Path]) -> None:
    r = resolve([write(BASE, "base.toml"), write(MERGING, "o.toml")], [], {})
    assert r.problems == []
    assert r.recipe.rollout.environment.options == {"higher": "up", "lower": "down",
                                                    "invalid": "bad"}


def test_replace_true_drops_what_the_base_recipe_set_in_that_table(
        write: Callable[..., Path]) -> None:
    base, overlay = write(BASE, "base.toml"), write(REPLACING, "o.toml")
    r = resolve([base, overlay], [], {})
    assert r.problems == []
    assert r.recipe.rollout.environment.options == {"invalid": "bad"}  # no marker left
    assert r.recipe.rollout.environment.name == "guess_digit"  # the table above still merges
    assert r.merged.source_of(("rollout", "environment", "options", "invalid")) == str(overlay)
    assert r.merged.source_of(("rollout", "environment", "options", "higher")) == "default"


def test_replace_works_inline_and_from_the_command_line(write: Callable[..., Path]) -> None:
    base = write(BASE, "base.toml")
    r = resolve([base], ['rollout.environment.options={_replace = true, lower = "less"}'], {})
    assert r.problems == [] and r.recipe.rollout.environment.options == {"lower": "less"}
    r = resolve([base], ["algorithm.kl={_replace = true}"], {})
    assert r.recipe.algorithm.kl.coef == Recipe().algorithm.kl.coef  # back to the defaults


def test_a_replace_marker_that_is_not_a_bool_is_a_problem(write: Callable[..., Path]) -> None:
    r = resolve([write(BASE, "base.toml")], ['algorithm.kl={_replace = "yes"}'], {})
    [problem] = r.problems
    assert problem.path == "algorithm.kl._replace" and "true or false" in problem.message


def test_tilde_unsets_a_key_so_its_default_applies(write: Callable[..., Path]) -> None:
    base = write(BASE, "base.toml")
    r = resolve([base], ["~algorithm.kl.coef", "~rollout.environment.options.higher"], {})
    assert r.problems == []
    assert r.recipe.algorithm.kl.coef == Recipe().algorithm.kl.coef
    assert r.recipe.rollout.environment.options == {"lower": "down"}
    assert r.merged.source_of(("algorithm", "kl", "coef")) == "default"


def test_tilde_removes_a_whole_table_or_a_list_element(write: Callable[..., Path]) -> None:
    two = BASE + '[[rewards]]\nname = "length_penalty"\n'
    r = resolve([write(two, "base.toml")], ["~rollout.environment.options", "~rewards.0"], {})
    assert r.problems == []
    assert r.recipe.rollout.environment.options == {}
    assert [x.name for x in r.recipe.rewards] == ["length_penalty"]


def test_a_later_override_sets_again_what_an_earlier_one_unset(write: Callable[..., Path]) -> None:
    r = resolve([write(BASE, "base.toml")], ["~algorithm.kl.coef", "algorithm.kl.coef=0.2"], {})
    assert r.problems == [] and r.recipe.algorithm.kl.coef == 0.2


@pytest.mark.parametrize(("override", "path", "words"), [
    ("~algorithm.kl.coeff", "algorithm.kl.coeff", "nothing to unset"),
    ("~rewards.5", "rewards.5", "nothing to unset"),
    ("~algorithm.kl.coef=1", "", "takes no value"),
    ("~", "", "takes no value"),
])
def test_an_unset_of_nothing_or_with_a_value_is_a_problem(
        write: Callable[..., Path], override: str, path: str, words: str) -> None:
    r = resolve([write(BASE, "base.toml")], [override], {})
    [problem] = r.problems
    assert problem.path == path and words in problem.message, problem
    assert problem.source.startswith("-s")


def _maze_registry():
    import types

    from rlctl.config.strict import OptionsModel
    from rlctl.hookspecs import hookimpl
    from rlctl.registry import build_registry

    class MazeOptions(OptionsModel):
        size: int = 5

    module = types.ModuleType("rlctl_test_maze")

    @hookimpl
    def register_environments(register):
        register("maze", object, options=MazeOptions)

    module.register_environments = register_environments
    return build_registry(external="none", extra=[module])


def test_the_overlay_that_swaps_the_environment_from_the_issue(
        write: Callable[..., Path]) -> None:
    """Another environment with other options: merged, the base's higher / lower land in the
    maze's options and are refused; replaced, the recipe validates."""
    registry = _maze_registry()
    base = write(BASE, "base.toml")
    swap = '[rollout.environment]\nname = "maze"\n[rollout.environment.options]\n'
    with pytest.raises(ConfigError) as merged:
        load_recipe([base, write(swap + "size = 7\n", "merge.toml")], env={}, registry=registry)
    assert {p.path for p in merged.value.problems} == {
        "rollout.environment.options.higher", "rollout.environment.options.lower"}
    loaded = load_recipe([base, write(swap + "_replace = true\nsize = 7\n", "swap.toml")],
                         env={}, registry=registry)
    assert loaded.recipe.rollout.environment.options == {"size": 7}
