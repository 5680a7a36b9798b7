"""``rlctl engines install | list``: the server engines' own environments, and ``train``'s
refusal (exit 2, the exact command) when a recipe selects an engine whose env is missing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
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


@pytest.mark.timeout(60)
def test_the_install_deadline_holds_when_the_build_prints_nothing(
        rlctl, env_dir, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """pip can be silent for minutes: the deadline used to be checked only when it printed."""
    from rlctl.cli import engines_cmd

    pid_file = tmp_path / "build.pid"
    script = tmp_path / "silent_build.sh"
    script.write_text(f"echo $$ > {pid_file}\nsleep 300\n")
    monkeypatch.setattr(engines_cmd, "BUILD_SCRIPT", script)
    started = time.monotonic()
    result = rlctl("engines", "install", "vllm", "--timeout-s", "1", code=1)
    assert time.monotonic() - started < 30
    assert "the build took longer than 1 s and was stopped" in result.stderr
    assert "Traceback" not in result.stderr
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # stopped, with its process group
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.1)


@pytest.mark.parametrize("kind", ["file", "read-only"])
def test_install_into_an_env_dir_it_cannot_write_is_one_line_exit_1(
        rlctl, tmp_path, monkeypatch, kind) -> None:  # type: ignore[no-untyped-def]
    if kind == "file":
        target = tmp_path / "envs"
        target.write_text("not a directory")
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only directory")
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        target = ro / "envs"
    monkeypatch.setenv("RLCTL_ENV_DIR", str(target))
    result = rlctl("engines", "install", "vllm", code=1)
    assert result.stderr.startswith(f"error: cannot use {target} for the engines' environments")
    assert "fix: set RLCTL_ENV_DIR to a writable directory" in result.stderr
    assert "Traceback" not in result.stderr
