"""Finding the inference engines' own environments
(``rlctl.engines.rollout.server.engine_envs``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from rlctl.engines.rollout.server.engine_envs import (
    ENV_NAMES,
    MARKER,
    EngineEnvError,
    built_env_python,
    engine_python,
)

SCRIPT = (Path(__file__).resolve().parents[4] / "rlctl" / "engines" / "rollout" / "server"
          / "build_engine_envs.sh")


def test_env_names_match_the_build_script():
    text = SCRIPT.read_text()
    versions = dict(re.findall(r'^(VLLM|SGLANG)_VERSION="([^"]+)"', text, flags=re.MULTILINE))
    assert ENV_NAMES == {
        "vllm": f"vllm-cpu-{versions['VLLM']}",
        "sglang": f"sglang-cpu-{versions['SGLANG']}",
    }
    for name in ENV_NAMES.values():
        prefix = name.rsplit("-", 1)[0]
        assert f'"{prefix}-${{' in text, f"the script no longer builds {prefix}-<version>"


def _fake_env(root: Path, engine: str, complete: bool) -> Path:
    env = root / ENV_NAMES[engine]
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    if complete:
        (env / MARKER).write_text("")
    return env


def test_order_recipe_then_env_var_then_built_env(tmp_path, monkeypatch):
    monkeypatch.setenv("RLCTL_ENV_DIR", str(tmp_path))
    monkeypatch.delenv("RLCTL_VLLM_PYTHON", raising=False)
    env = _fake_env(tmp_path, "vllm", complete=True)
    assert built_env_python("vllm") == str(env / "bin" / "python")
    assert engine_python("vllm") == str(env / "bin" / "python")
    other = tmp_path / "other" / "python"
    other.parent.mkdir()
    other.symlink_to(sys.executable)
    monkeypatch.setenv("RLCTL_VLLM_PYTHON", str(other))
    assert engine_python("vllm") == str(other)
    assert engine_python("vllm", "/from/recipe/python") == "/from/recipe/python"


@pytest.mark.parametrize(
    "value, why",
    [
        ("python3", "relative path"),
        ("/nonexistent/python", "does not exist"),
        ("{tmp}", "not a file"),
        ("{tmp}/data.txt", "not executable"),
    ],
)
def test_an_env_var_interpreter_must_be_an_absolute_executable(monkeypatch, tmp_path, value, why):
    (tmp_path / "data.txt").write_text("not a program")
    (tmp_path / "data.txt").chmod(0o644)
    monkeypatch.setenv("RLCTL_VLLM_PYTHON", value.format(tmp=tmp_path))
    with pytest.raises(EngineEnvError, match=f"RLCTL_VLLM_PYTHON: .*{why}"):
        engine_python("vllm")


def test_a_half_built_env_does_not_count_and_the_error_says_how_to_build(tmp_path, monkeypatch):
    monkeypatch.setenv("RLCTL_ENV_DIR", str(tmp_path))
    monkeypatch.delenv("RLCTL_SGLANG_PYTHON", raising=False)
    _fake_env(tmp_path, "sglang", complete=False)
    assert built_env_python("sglang") is None
    import importlib.util

    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("sglang is importable here: this interpreter would be used")
    with pytest.raises(EngineEnvError, match=r"rlctl engines install sglang"):
        engine_python("sglang")
