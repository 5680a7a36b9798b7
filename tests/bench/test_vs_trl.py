"""benchmarks/vs_trl.py: how it measures, how it refuses bad input, and (with the TRL env
built) a short real run of TRL and rlctl side by side."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "vs_trl.py"


def _load():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("vs_trl", SCRIPT)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["vs_trl"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


vs_trl = _load()


def test_s_per_step_is_the_median_of_the_measured_steps_and_tokens_per_s_their_rate() -> None:
    # steps end at 1, 3, 4, 6, 7, 9.5: durations of steps 2..6 are 2, 1, 2, 1, 2.5
    ends = [1.0, 3.0, 4.0, 6.0, 7.0, 9.5]
    tokens = [100.0, 200.0, 300.0, 400.0, 500.0, 600.0]
    r = vs_trl.summarise("x", ends, tokens, [0.0, 0.1, 0.2, 0.3, 0.4, 0.5], skip=2,
                         wall_s=12.0, loads=(1.0, 2.0))
    assert r.s_per_step == 1.5  # median of steps 3..6: 1, 2, 1, 2.5
    assert r.gen_tokens_per_s == pytest.approx((300 + 400 + 500 + 600) / (1 + 2 + 1 + 2.5))
    assert r.reward_last5 == pytest.approx(0.3) and r.steps == 6 and r.wall_s == 12.0
    with pytest.raises(ValueError, match="need more than skip"):
        vs_trl.summarise("x", ends[:2], tokens[:2], [0, 0], skip=2, wall_s=1, loads=(0, 0))


def test_the_trl_env_name_follows_the_build_script() -> None:
    text = (REPO / "benchmarks" / "build_trl_env.sh").read_text()
    version = re.search(r'^TRL_VERSION="([^"]+)"', text, flags=re.MULTILINE).group(1)  # type: ignore[union-attr]
    assert vs_trl.TRL_ENV == f"trl-{version}"
    assert 'name="trl-${TRL_VERSION}"' in text
    assert vs_trl.BUILD_SCRIPT == REPO / "benchmarks" / "build_trl_env.sh"


def _run(*args: str, env_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in __import__("os").environ.items() if k != "RLCTL_ENV_DIR"}
    if env_dir is not None:
        env["RLCTL_ENV_DIR"] = str(env_dir)
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=120, env=env, check=False)


def test_bad_arguments_exit_2_with_the_fix_and_write_nothing(tmp_path: Path) -> None:
    out = _run("--runs", "trl,vllm")
    assert out.returncode == 2 and "--runs: unknown ['vllm']" in out.stderr
    out = _run("--steps", "5", "--skip", "5")
    assert out.returncode == 2 and "need --steps > --skip" in out.stderr
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "mine.txt").write_text("not the benchmark's")
    out = _run("--keep", str(kept))
    assert out.returncode == 2 and "exists; name a new directory" in out.stderr
    assert [p.name for p in kept.iterdir()] == ["mine.txt"]


def test_a_missing_trl_env_is_an_error_that_says_how_to_build_it(tmp_path: Path) -> None:
    out = _run("--runs", "trl", "--keep", str(tmp_path / "run"), env_dir=tmp_path / "envs")
    assert out.returncode == 2
    assert "no TRL env" in out.stderr and "--build-env" in out.stderr
    assert "benchmarks/build_trl_env.sh" in out.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "envs").exists()


@pytest.mark.slow
@pytest.mark.skipif(not vs_trl.trl_env_ready(), reason="bash benchmarks/build_trl_env.sh (by hand)")
def test_a_short_run_measures_trl_and_rlctl_on_the_same_work(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--steps", "4", "--skip", "1", "--runs", "trl,local",
         "--json", "--keep", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=1200, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    names = [r["name"] for r in data["runs"]]
    assert names == ["trl 1.16.0", "rlctl --local"]
    for r in data["runs"]:
        assert r["steps"] == 4 and r["s_per_step"] > 0 and r["wall_s"] > r["s_per_step"]
        # 512 samples of up to 3 new tokens per step
        assert 0 < r["gen_tokens_per_s"] * r["s_per_step"] <= 512 * 3 * 1.5
        assert 0.0 <= r["reward_last5"] <= 1.0
    trl_log = (tmp_path / "run" / "trl.log").read_text()
    assert "huggingface.co" not in trl_log  # built offline: no hub access was attempted
