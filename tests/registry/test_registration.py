"""Registration is all or nothing per plugin, and a name collision blames the plugin that
caused it (entry point and distribution), says how to fix it, and never picks a winner by
install order. Plugins are installed for real (see ``conftest.install``)."""

from __future__ import annotations

from pathlib import Path

from inline_snapshot import snapshot

from rlctl.registry import build_registry

ROOT = Path(__file__).resolve().parents[2]

HALF_WAY = '''
from rlctl.hookspecs import hookimpl

@hookimpl
def register_advantage_estimators(register):
    register("halfway_estimator", "halfway_plugin:estimate")

@hookimpl
def register_reward_functions(register):
    register("halfway_reward", "halfway_plugin:score")
    raise RuntimeError("the plugin's config file is missing")
'''


def _failure(registry, name: str) -> str:
    found = [f.error for f in registry.failures if f.name == name]
    assert len(found) == 1, registry.failures
    return found[0]


def test_a_plugin_that_raises_half_way_registers_nothing(install) -> None:
    install("halfway-rlctl", {"halfway": "halfway_plugin"}, {"halfway_plugin": HALF_WAY})
    registry = build_registry(external="halfway")
    # the estimator hook ran and registered before the reward hook raised: dropped too
    assert registry.find("advantage_estimator", "halfway_estimator") is None
    assert registry.find("reward_function", "halfway_reward") is None
    assert list(registry.by_plugin("halfway")) == []
    assert registry.pm.get_plugin("halfway") is None
    error = _failure(registry, "halfway")
    assert error.startswith("RuntimeError: the plugin's config file is missing (at ")
    assert error.endswith("halfway_plugin.py:11)")


SHADOW = '''
from rlctl.hookspecs import hookimpl

@hookimpl
def register_reward_functions(register):
    register("shadow_own", "shadow_plugin:own")
    register("exact_match", "shadow_plugin:own")

def own(sample, **options):
    return 1.0

@hookimpl
def validate_config(recipe):
    return ["shadow objects to every recipe"]
'''


def test_a_builtin_name_stays_builtin_and_the_plugin_that_claims_it_is_named(install) -> None:
    install("shadow-rlctl", {"shadow": "shadow_plugin"}, {"shadow_plugin": SHADOW})
    registry = build_registry(external="shadow")
    assert registry.get("reward_function", "exact_match").plugin.name == "rlctl.plugins.rewards"
    assert registry.find("reward_function", "shadow_own") is None  # all or nothing
    # ... its other hooks are out too: a refused plugin's validate_config never runs
    assert registry.pm.get_plugin("shadow") is None
    assert "shadow" not in [p.name for p in registry.plugins]
    error = _failure(registry, "shadow")
    assert error == snapshot(
        'plugin shadow (entry point `shadow = shadow_plugin` of shadow-rlctl 0.1) registers '
        'nothing: reward function "exact_match" is a built-in name (of built-in plugin '
        'rlctl.plugins.rewards), and built-ins keep their names; fix: rename it in the '
        'plugin, e.g. "shadow_exact_match"'
    )
    # docs/plugins.md shows this very message (as `plugins list` prints it)
    docs = " ".join((ROOT / "docs" / "plugins.md").read_text(encoding="utf-8").split())
    assert f"shadow (shadow_plugin): {error}" in docs


def _claims_shared(own: str) -> str:
    return f'''
from rlctl.hookspecs import hookimpl

@hookimpl
def register_reward_functions(register):
    register("{own}", "builtins:len")
    register("shared", "builtins:len")
'''


def test_two_third_party_plugins_claiming_a_name_both_register_nothing(install) -> None:
    install("alpha-rlctl", {"alpha": "alpha_plugin"}, {"alpha_plugin": _claims_shared("a")})
    install("beta-rlctl", {"beta": "beta_plugin"}, {"beta_plugin": _claims_shared("b")},
            version="2.0")
    for order in ("alpha,beta", "beta,alpha"):  # the outcome must not depend on order
        registry = build_registry(external=order)
        for name in ("a", "b", "shared"):
            assert registry.find("reward_function", name) is None, (order, name)
        assert _failure(registry, "alpha") == snapshot(
            'plugin alpha (entry point `alpha = alpha_plugin` of alpha-rlctl 0.1) registers '
            'nothing: reward function "shared" is also registered by plugin beta (entry point '
            '`beta = beta_plugin` of beta-rlctl 2.0); a name that two plugins register goes to '
            'neither (rlctl never picks a winner by install order); fix: ask the authors of '
            'one plugin to rename it, or uninstall one; to leave this one out: '
            'RLCTL_PLUGINS=beta'
        )
        assert "to leave this one out: RLCTL_PLUGINS=alpha" in _failure(registry, "beta")
    # the fix the message gives works: with one of them left out, the other loads whole
    alone = build_registry(external="beta")
    assert alone.failures == []
    assert alone.get("reward_function", "shared").plugin.distribution == "beta-rlctl"
    assert alone.find("reward_function", "b") is not None


def test_a_plugin_that_registers_a_name_twice_registers_nothing(install) -> None:
    source = '''
from rlctl.hookspecs import hookimpl

@hookimpl
def register_tasks(register):
    register("twice", "builtins:len")
    register("twice", "builtins:len")
'''
    install("twice-rlctl", {"twice": "twice_plugin"}, {"twice_plugin": source})
    registry = build_registry(external="twice")
    assert registry.find("task", "twice") is None
    assert _failure(registry, "twice").endswith(
        'registers nothing: it registers task "twice" twice; register each name once')


def test_builtins_alone_register_without_failures() -> None:
    registry = build_registry(external="none")
    assert registry.failures == []
    assert registry.find("reward_function", "exact_match") is not None
