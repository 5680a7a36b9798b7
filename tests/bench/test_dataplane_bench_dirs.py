"""``rlctl bench dataplane`` leaves no directory behind, and none another user can reach
(it used to leave Ray's mode-0777 temp directory in /tmp; issue 30)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def short_tmp():
    """A TMPDIR with a short path: Ray's socket paths under it must stay within 107 bytes."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="rb", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_benchmark_cleans_up_its_ray_directory(short_tmp: Path) -> None:
    tmp_path = short_tmp
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT))
    args = ["bench", "dataplane", "--backends", "ray", "--samples", "2", "--seq-len", "8",
            "--fields", "1", "--repeats", "1", "--warmup", "0", "--settle-ms", "0",
            "--small-puts", "0", "--no-zero-copy-row", "--json"]
    proc = subprocess.run([sys.executable, "-m", "rlctl", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=280, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("rlctl-bench")]
    open_to_all = [p for p in tmp_path.rglob("*")
                   if p.is_dir() and stat.S_IMODE(p.stat().st_mode) & 0o002]
    assert open_to_all == []  # Ray made its _temp_dir 0777
    base = tmp_path / f"rlctl-ray-{os.getuid()}"
    assert stat.S_IMODE(base.stat().st_mode) == 0o700
    assert list(base.iterdir()) == []  # the run's directory (and its lock) went with Ray


def test_a_single_process_or_unknown_backend_is_refused_with_exit_2() -> None:
    from typer.testing import CliRunner

    from rlctl.cli.app import build_app

    for backend, words in (("memory", "lives in one process"), ("redis", "no data plane named")):
        result = CliRunner().invoke(build_app(), ["bench", "dataplane", "--backends", backend])
        assert result.exit_code == 2 and words in result.output, result.output
        assert "Traceback" not in result.output
