"""``rlctl engines install | list``: the server engines' own environments, and ``train``'s
refusal (exit 2, the exact command) when a recipe selects an engine whose env is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlctl.engines.rollout.server.engine_envs import ENV_NAMES, MARKER
from tests.cli.cli_helpers import ROOT


def _fake_env(root: Path, engine: str, complete: bool) -> Path:
    env = root / ENV_NAMES[engine]
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    if complete:
        (env / MARKER).write_text("")
    return env


@pytest.fixture
def env_dir(tmp_path, monkeypatch) -> Path:  # type: ignore[no-untyped-def]
    root = tmp_path / "envs"
    monkeypatch.setenv("RLCTL_ENV_DIR", str(root))
    for engine in ENV_NAMES:
        monkeypatch.delenv(f"RLCTL_{engine.upper()}_PYTHON", raising=False)
    return root


def test_list_says_built_incomplete_or_missing(rlctl, env_dir) -> None:  # type: ignore[no-untyped-def]
    _fake_env(env_dir, "vllm", complete=True)
    _fake_env(env_dir, "sglang", complete=False)
    out = rlctl("engines", "list").stdout
    assert out.splitlines() == [
        f"sglang   incomplete  {env_dir / ENV_NAMES['sglang']}",
        f"vllm     built       {env_dir / ENV_NAMES['vllm']}",
    ]
    import shutil

    shutil.rmtree(env_dir / ENV_NAMES["sglang"])
    assert rlctl("engines", "list").stdout.splitlines()[0].split()[:2] == ["sglang", "missing"]


def test_install_of_a_built_env_runs_the_packaged_script_and_prints_the_interpreter(
    env_dir,
) -> None:  # type: ignore[no-untyped-def]
    env = _fake_env(env_dir, "vllm", complete=True)
    # A real process: the packaged build script runs (and finds the env complete).
    out = subprocess.run([sys.executable, "-c", "from rlctl.cli.app import main; main()",
                          "engines", "install", "vllm"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"vllm={env / 'bin' / 'python'}"
    assert "already built" in out.stderr
    assert "=== rlctl engines install vllm" in (env_dir / "install.log").read_text()


def test_install_refuses_an_unknown_engine(rlctl, env_dir) -> None:  # type: ignore[no-untyped-def]
    result = rlctl("engines", "install", "tgi", code=2)
    assert "unknown engine 'tgi'" in result.stderr and "choose from sglang, vllm" in result.stderr
    assert not env_dir.exists()


def test_train_with_a_missing_engine_env_says_the_command_and_writes_nothing(
    rlctl, env_dir, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is importable here: this interpreter would start its servers")
    out_dir = tmp_path / "runs"
    result = rlctl("train", str(ROOT / "recipes" / "tiny_grpo.toml"),
                   "-s", "engines.rollout.backend=vllm", "-s", "model.tiny.head_dim=32",
                   "-s", f"run.output_dir={out_dir}", code=2)
    assert "engines.rollout.backend = 'vllm'" in result.stderr
    assert "fix: run `rlctl engines install vllm`" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out_dir.exists()


def test_attached_servers_need_no_env(rlctl, env_dir) -> None:  # type: ignore[no-untyped-def]
    from rlctl.engines.rollout.server.engine_envs import missing_env_message
    from rlctl.engines.rollout.vllm.options import VLLMOptions

    assert missing_env_message("vllm", VLLMOptions(urls=["http://127.0.0.1:9"])) is None
    assert missing_env_message("hf", None) is None
    assert "rlctl engines install sglang" in (missing_env_message("sglang", VLLMOptions()) or "")
