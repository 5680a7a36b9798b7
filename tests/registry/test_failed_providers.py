"""A plugin that failed to load is named where its names are used: a recipe that selects one
is told that plugin failed (not "did you mean" an unrelated built-in), and a misspelt hook
says which hook was meant (issue 30). Plugins are installed for real (``conftest.install``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlctl.config.pipeline import load_recipe
from rlctl.config.problems import ConfigError
from rlctl.registry import build_registry

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "recipes" / "tiny_grpo.toml"

# registers its estimator, then its reward hook raises: the plugin registers nothing
HALF_WAY = '''
from rlctl.hookspecs import hookimpl

@hookimpl
def register_advantage_estimators(register):
    register("token_baseline_plus", "halfway_plugin:estimate")

@hookimpl
def register_reward_functions(register):
    raise RuntimeError("the plugin's config file is missing")
'''

MISSPELT = '''
from rlctl.hookspecs import hookimpl

@hookimpl
def register_tool(register):  # register_tools
    register("weather", object)
'''


def problems(*overrides: str, registry) -> list[str]:
    with pytest.raises(ConfigError) as failure:
        load_recipe([TINY], list(overrides), env={}, registry=registry)
    return [p.render() for p in failure.value.problems]


def test_a_name_of_a_plugin_that_failed_says_that_plugin_failed(install) -> None:
    install("halfway-rlctl", {"halfway": "halfway_plugin"}, {"halfway_plugin": HALF_WAY})
    registry = build_registry(external="halfway")
    [failure] = registry.failures
    assert failure.provides == (("advantage_estimator", "token_baseline_plus"),)
    [text] = problems('algorithm.estimator="token_baseline_plus"', registry=registry)
    assert text.startswith('algorithm.estimator: no advantage estimator named '
                           '"token_baseline_plus" is registered: plugin halfway, which provides '
                           "it, failed to load: RuntimeError: the plugin's config file is missing")
    assert "fix or reinstall plugin halfway" in text
    assert "did you mean" not in text  # not "optimal_token_baseline", a built-in it resembles


def test_with_a_plugin_that_did_not_import_only_a_close_guess_is_offered(install) -> None:
    install("broken-rlctl", {"broken": "broken_plugin"},
            {"broken_plugin": 'raise ImportError("needs torch_scatter")\n'})
    registry = build_registry(external="broken")
    [loose] = problems('algorithm.estimator="token_baseline_plus"', registry=registry)
    assert "plugins that failed to load: broken" in loose and "did you mean" not in loose
    assert "registered advantage estimators: " in loose
    [close] = problems('algorithm.estimator="grpo_"', registry=registry)
    assert 'did you mean "grpo"?' in close and "plugins that failed to load: broken" in close


def test_without_failed_plugins_a_misspelt_name_gets_a_guess() -> None:
    [text] = problems('algorithm.estimator="rlooo"', registry=build_registry(external="none"))
    assert 'did you mean "rloo"?' in text


def test_a_misspelt_hook_names_the_hook_meant(install) -> None:
    install("misspelt-rlctl", {"misspelt": "misspelt_plugin"}, {"misspelt_plugin": MISSPELT})
    registry = build_registry(external="misspelt")
    [failure] = registry.failures
    assert failure.name == "misspelt"
    assert "unknown hook 'register_tool'" in failure.error
    assert "did you mean 'register_tools'?" in failure.error
    assert registry.find("tool", "weather") is None
