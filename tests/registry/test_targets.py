"""Lazy ``module:attr`` targets: checked without importing them (so ``config validate`` stays
free of torch), and a broken one blames its plugin and name at validate and at load time."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlctl.config.pipeline import load_recipe
from rlctl.config.problems import ConfigError
from rlctl.registry import RegistryError, TargetError, build_registry
from rlctl.registry_targets import static_problem

ROOT = Path(__file__).resolve().parents[2]

# Importing this module would be a bug of the check: it stands in for one that imports torch.
HEAVY = '''
raise RuntimeError("the static check imported me")

import os
from json import dumps as dump_json

def score(sample, **options):
    return 1.0

class Scorer:
    scale = 2.0

    def __call__(self, sample):
        return self.scale

if os.name:
    conditional = 1
try:
    from fast_lib import fast
except ImportError:
    fast = None

def _set_up():
    global created_later
    created_later = 1
'''


@pytest.fixture
def heavy(install) -> str:
    install("heavy-rlctl", {}, {"heavypkg.__init__": "", "heavypkg.rewards": HEAVY,
                                "heavypkg.extra": "x = 1\n"})
    yield "heavypkg.rewards"
    assert "heavypkg.rewards" not in sys.modules


@pytest.mark.parametrize("attr", ["score", "Scorer", "Scorer.scale", "Scorer.__call__", "os",
                                  "dump_json", "conditional", "fast", "created_later"])
def test_defined_names_resolve_without_importing_the_module(heavy: str, attr: str) -> None:
    assert static_problem(f"{heavy}:{attr}") is None


@pytest.mark.parametrize(("target", "problem"), [
    ("heavypkg.rewards:scroe",
     "'heavypkg.rewards' has no attribute 'scroe' (did you mean 'score'?)"),
    ("heavypkg.rewards:Scorer.scael",
     "'heavypkg.rewards.Scorer' has no attribute 'scael' (did you mean 'scale'?)"),
    ("heavypkg.reward:score",
     "no module named 'heavypkg.reward' (did you mean 'heavypkg.rewards'?)"),
    ("heavypkgg.rewards:score",
     ("module 'heavypkgg.rewards' cannot be found (ModuleNotFoundError: No module named "
      "'heavypkgg')")),
    ("heavypkg.rewards.score",
     "target 'heavypkg.rewards.score' is not of the form 'package.module:attr'"),
    ("heavypkg.rewards:", "target 'heavypkg.rewards:' is not of the form 'package.module:attr'"),
])
def test_broken_targets_say_what_is_missing(heavy: str, target: str, problem: str) -> None:
    assert static_problem(target) == problem


def test_what_cannot_be_seen_statically_is_let_through(install) -> None:
    install("dyn-rlctl", {}, {
        "dyn_getattr": "def __getattr__(name):\n    return len\n",
        "dyn_star": "from os.path import *\n",
        "dyn_globals": "globals()['made'] = len\n",
        "dynpkg.__init__": "",
        "dynpkg.sub": "x = 1\n",
    })
    for target in ("dyn_getattr:anything", "dyn_star:join", "dyn_globals:made", "dynpkg:sub"):
        assert static_problem(target) is None, target
    assert static_problem("dyn_getattr.nope:x") is not None  # the module must still exist


def test_callables_and_already_imported_modules() -> None:
    assert static_problem(len) is None
    assert static_problem("rlctl.registry:build_registry") is None
    assert static_problem("rlctl.registry:build_registy") == (
        "'rlctl.registry' has no attribute 'build_registy' (did you mean 'build_registry'?)")
    assert static_problem(42) == "target 42 is neither callable nor a 'module:attr' string"


TYPO = '''
from rlctl.hookspecs import hookimpl

@hookimpl
def register_reward_functions(register):
    register("shout", "typo_rewards:shuot")
'''


@pytest.fixture
def typo_plugin(install):
    install("typo-rlctl", {"typo": "typo_plugin"},
            {"typo_plugin": TYPO, "typo_rewards": HEAVY.replace("def score", "def shout")})
    registry = build_registry(external="typo")
    assert registry.failures == []  # registering works: the target is only a string
    return registry


def test_config_validation_reports_a_broken_target_of_a_selected_name(typo_plugin, tmp_path):
    overlay = tmp_path / "overlay.toml"
    overlay.write_text('[[rewards]]\nname = "shout"\n')
    with pytest.raises(ConfigError) as err:
        load_recipe([ROOT / "recipes" / "tiny_grpo.toml", overlay], env={},
                    registry=typo_plugin)
    [problem] = [p for p in err.value.problems if p.path == "rewards[0].name"]
    assert problem.message == (
        'reward function "shout" of plugin typo (entry point `typo = typo_plugin` of '
        "typo-rlctl 0.1) cannot be loaded: its target 'typo_rewards:shuot' is broken: "
        "'typo_rewards' has no attribute 'shuot' (did you mean 'shout'?)")
    assert "rlctl plugins list --check" in problem.fix
    assert "typo_rewards" not in sys.modules


def test_a_recipe_that_does_not_select_the_broken_name_validates(typo_plugin) -> None:
    load_recipe([ROOT / "recipes" / "tiny_grpo.toml"], env={}, registry=typo_plugin)


def test_loading_a_broken_target_names_plugin_kind_and_name(typo_plugin) -> None:
    with pytest.raises(TargetError) as err:
        typo_plugin.load("reward_function", "shout")
    assert isinstance(err.value, RegistryError) and isinstance(err.value, ImportError)
    message = str(err.value)
    assert message.startswith(
        'reward function "shout" of plugin typo (entry point `typo = typo_plugin` of '
        "typo-rlctl 0.1): its target 'typo_rewards:shuot' does not load: RuntimeError: "
        "the static check imported me (at ")
    assert "typo_rewards.py:2)" in message


def test_loading_a_missing_attribute_suggests_the_right_one(install) -> None:
    install("light-rlctl", {"light": "light_plugin"}, {
        "light_plugin": TYPO.replace("typo_rewards", "light_rewards"),
        "light_rewards": "def shout(sample, **options):\n    return 1.0\n",
    })
    registry = build_registry(external="light")
    with pytest.raises(TargetError) as err:
        registry.load("reward_function", "shout")
    assert str(err.value) == (
        'reward function "shout" of plugin light (entry point `light = light_plugin` of '
        "light-rlctl 0.1): its target 'light_rewards:shuot' does not load: AttributeError: "
        "'light_rewards' has no attribute 'shuot' (did you mean 'shout'?); fix the target or "
        "the module in the plugin (`rlctl plugins list --check` checks every target)")
