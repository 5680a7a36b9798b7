"""The real model learns a real task: ``recipes/smollm2_grpo.toml`` (the bar of docs/real-model.md).

Heavy (about 20 minutes on a quiet 2-core CPU; left out of CI) and skipped, with the command,
unless the model is installed. Run it with

    rlctl models install smollm2-135m
    python -m pytest -q -m heavy tests/models/test_real_model.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlctl.models.catalog import install_command, is_installed

REPO = Path(__file__).resolve().parents[2]
MODEL = "smollm2-135m"

pytestmark = [
    pytest.mark.heavy,
    pytest.mark.slow,  # out of the quick loop (-m "not slow") too
    pytest.mark.skipif(not is_installed(MODEL), reason=f"run `{install_command(MODEL)}` first"),
    pytest.mark.timeout(3 * 3600),
]


def test_grpo_lifts_held_out_greedy_accuracy_by_40_points(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rlctl", "train", str(REPO / "recipes" / "smollm2_grpo.toml"),
         "--quiet", "-s", f'run.output_dir="{tmp_path}"'],
        capture_output=True, text=True, timeout=3 * 3600, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in
            (tmp_path / "smollm2-grpo" / "metrics.jsonl").read_text().splitlines()]
    accuracy = {r["step"]: r["val/pass@1"] for r in rows if "val/pass@1" in r}
    base, trained = accuracy[0], accuracy[max(accuracy)]
    assert trained - base >= 0.40, accuracy
