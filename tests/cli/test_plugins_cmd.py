"""``rlctl plugins list``: built-ins, third-party entry points, and plugins that fail."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from inline_snapshot import snapshot

from rlctl import __version__
from rlctl.registry import BUILTIN_MODULES
from tests.cli.cli_helpers import DATA, ROOT


def test_json_lists_every_builtin_with_what_it_registered(rlctl) -> None:  # type: ignore[no-untyped-def]
    report = json.loads(rlctl("plugins", "list", "--json").stdout)
    plugins = {p["name"]: p for p in report["plugins"]}
    assert list(plugins) == list(BUILTIN_MODULES)  # RLCTL_PLUGINS=none in these tests
    for p in plugins.values():
        assert (p["distribution"], p["version"], p["builtin"]) == ("rlctl", __version__, True)
    names = {
        kind: {r["name"] for p in plugins.values() for r in p["registered"].get(kind, [])}
        for kind in ("model_engine", "rollout_engine", "data_plane")
    }
    assert {"fsdp", "megatron"} <= names["model_engine"]
    assert {"hf", "vllm", "sglang"} <= names["rollout_engine"]
    assert {"memory", "ray", "transferqueue"} <= names["data_plane"]
    fsdp = next(r for r in plugins["rlctl.plugins.model_engines"]["registered"]["model_engine"]
                if r["name"] == "fsdp")
    assert "mixed_precision" in fsdp["options"]
    assert report["failures"] == []


def test_text_lists_in_process_plugins_and_refuses_a_name_without_target(  # type: ignore[no-untyped-def]
    rlctl, extra_plugins
) -> None:
    text = rlctl("plugins", "list").stdout
    block = next(b for b in text.split("\n\n") if b.startswith("ExtraEnginesPlugin"))
    assert block.splitlines()[1] == "  rollout engine: hf-copy"
    failed = next(b for b in text.split("\n\n") if b.startswith("failed to load:"))
    assert "NoTargetPlugin" in failed and "rollout_engine 'planned' has no target" in failed
    assert "planned" not in block
    builtin = next(b for b in text.split("\n\n") if b.startswith("rlctl.plugins.model_engines"))
    assert builtin.splitlines()[0] == f"rlctl.plugins.model_engines  (rlctl {__version__}, built-in)"


def _rlctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RLCTL_")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "rlctl", *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=120, check=False)


def _example_installed() -> bool:
    try:
        version("rlctl-plugin-example")
    except PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not _example_installed(),
                    reason="pip install -e examples/rlctl-plugin-example (CI does)")
def test_installed_example_plugin_is_listed_and_selectable() -> None:
    listed = _rlctl("plugins", "list")
    assert listed.returncode == 0, listed.stderr
    block = next(b for b in listed.stdout.split("\n\n") if b.startswith("example ")).rstrip()
    assert block == snapshot("""\
example  (rlctl-plugin-example 0.1.0, module rlctl_plugin_example.plugin)
  advantage estimator: median_baseline
  reward function: numeric_closeness\
""")
    ok = _rlctl("config", "validate", "recipes/tiny_grpo.toml",
                "examples/rlctl-plugin-example/recipe.toml")
    assert ok.returncode == 0, ok.stderr
    assert "median_baseline" in ok.stdout


def _fake_dist(root: Path, dist: str, entry_points: str, modules: dict[str, str]) -> None:
    """An installed-looking distribution: a dist-info with entry points, plus its modules."""
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rlctl]\n" + entry_points)
    for name, source in modules.items():
        (root / f"{name}.py").write_text(source)


def _fake_broken_plugins(root: Path) -> None:
    """Two installed-looking distributions whose plugins are broken in different ways."""
    _fake_dist(root, "broken-rlctl-plugins",
               "broken = broken_import_mod\nmisspelt = misspelt_hook_mod\n", {
                   "broken_import_mod":
                       'raise ImportError("needs a library that is not installed")\n',
                   "misspelt_hook_mod":
                       "from rlctl.hookspecs import hookimpl\n\n\n@hookimpl\n"
                       "def register_reward_function(register):  # missing 's'\n    pass\n",
               })


def test_broken_plugins_are_reported_and_never_break_the_cli(tmp_path: Path) -> None:
    _fake_broken_plugins(tmp_path)
    env = {"PYTHONPATH": str(tmp_path)}
    listed = _rlctl("plugins", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    failures = {f["name"]: f for f in json.loads(listed.stdout)["failures"]}
    assert set(failures) == {"broken", "misspelt"}
    assert failures["broken"]["source"] == "broken_import_mod"
    assert failures["broken"]["error"].startswith(
        "ImportError: needs a library that is not installed")
    assert "register_reward_function" in failures["misspelt"]["error"]
    text = _rlctl("plugins", "list", env=env).stdout
    assert "failed to load:\n  broken (broken_import_mod): ImportError" in text
    valid = _rlctl("config", "validate", str(DATA / "small.toml"), env=env)
    assert valid.returncode == 0, valid.stderr
    # a name the broken plugin would have provided points at the failure
    bad = _rlctl("config", "validate", str(DATA / "small.toml"), "-s",
                 "data_plane.backend=redis", env=env)
    assert bad.returncode == 2
    assert "plugins that failed to load: broken, misspelt" in bad.stderr


def test_check_finds_every_builtin_target(rlctl) -> None:  # type: ignore[no-untyped-def]
    text = rlctl("plugins", "list", "--check").stdout
    assert re.fullmatch(r"target check: all \d+ targets resolve", text.splitlines()[-1])
    check = json.loads(rlctl("plugins", "list", "--check", "--json").stdout)["target_check"]
    assert check["broken"] == [] and check["checked"] >= 40


def _fake_typo_plugin(root: Path) -> None:
    """A plugin whose reward target is misspelt; its module must never be imported by
    `config validate` or `plugins list --check` (it stands in for one that imports torch)."""
    _fake_dist(root, "typo-rlctl", "typo = typo_plugin\n", {
        "typo_plugin": "from rlctl.hookspecs import hookimpl\n\n\n@hookimpl\n"
                       "def register_reward_functions(register):\n"
                       '    register("shout", "typo_rewards:shuot")\n',
        "typo_rewards": 'raise RuntimeError("imported")\n\n\n'
                        "def shout(sample, **options):\n    return 1.0\n",
    })


def test_a_misspelt_target_is_reported_by_check_and_validate(tmp_path: Path) -> None:
    _fake_typo_plugin(tmp_path)
    env = {"PYTHONPATH": str(tmp_path)}
    listed = _rlctl("plugins", "list", "--check", env=env)
    assert listed.returncode == 1, listed.stderr
    broken = re.sub(r"\d+ of \d+", "1 of N", listed.stdout.rstrip().split("\n\n")[-1])
    assert broken == snapshot("""\
target check: 1 of N targets are broken:
  reward function "shout" of plugin typo (entry point `typo = typo_plugin` of typo-rlctl 0.1): target 'typo_rewards:shuot': 'typo_rewards' has no attribute 'shuot' (did you mean 'shout'?)\
""")
    overlay = tmp_path / "overlay.toml"
    overlay.write_text('[[rewards]]\nname = "shout"\n')
    bad = _rlctl("config", "validate", "recipes/tiny_grpo.toml", str(overlay), env=env)
    assert bad.returncode == 2
    assert bad.stderr.replace(str(tmp_path), "<tmp>") == snapshot("""\
error: the recipe has 1 problem:
  rewards[0].name: reward function "shout" of plugin typo (entry point `typo = typo_plugin` of typo-rlctl 0.1) cannot be loaded: its target 'typo_rewards:shuot' is broken: 'typo_rewards' has no attribute 'shuot' (did you mean 'shout'?)  [from <tmp>/overlay.toml]
      fix: fix the target in the plugin's register() call (or report it to the plugin's authors), or choose another name; `rlctl plugins list --check` checks every target
""")
    # a recipe that does not select the broken name is not held up by it
    assert _rlctl("config", "validate", "recipes/tiny_grpo.toml", env=env).returncode == 0


def test_check_exits_1_when_a_plugin_failed_to_load(tmp_path: Path) -> None:
    _fake_broken_plugins(tmp_path)
    listed = _rlctl("plugins", "list", "--check", env={"PYTHONPATH": str(tmp_path)})
    assert listed.returncode == 1
    assert "failed to load:\n  broken (broken_import_mod): ImportError" in listed.stdout
