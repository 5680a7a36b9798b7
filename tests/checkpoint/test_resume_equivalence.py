"""The checkpoint building blocks compose into an exact resume.

A toy trainer (tests/checkpoint/toy_resumable_trainer.py) is SIGKILLed while saving step 6; resumed
from step 4, its metrics.jsonl equals an uninterrupted run's, step for step.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("toy_resumable_trainer.py")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k != "time"} for row in rows]


def test_killed_and_resumed_equals_uninterrupted(tmp_path: Path) -> None:
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    assert run(str(straight), "9").returncode == 0

    crashed = run(str(interrupted), "9", "--crash-while-saving", "6")
    assert crashed.returncode == -signal.SIGKILL
    assert [r["step"] for r in metrics(interrupted)] == [1, 2, 3, 4, 5, 6]
    assert (interrupted / "checkpoints" / "latest").read_text() == "step_4\n"
    assert (interrupted / "checkpoints" / ".step_6.partial").is_dir()

    resumed = run(str(interrupted), "9", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert metrics(interrupted) == metrics(straight)
    assert [r["step"] for r in metrics(straight)] == list(range(1, 10))
    assert sorted(p.name for p in (interrupted / "checkpoints").iterdir()) == [
        "latest",
        "step_6",
        "step_8",
    ]
