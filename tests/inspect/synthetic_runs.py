"""Synthetic run directories for the run tests (imported by conftest and tests)."""

from __future__ import annotations

import json
from pathlib import Path


def write_metrics(run_dir: Path, rows: list[dict], *, start_time: float = 1_700_000_000.0) -> Path:
    """A metrics.jsonl as the jsonl sink writes it: one object per step, ``time`` at step end."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "metrics.jsonl"
    with path.open("w") as f:
        for i, row in enumerate(rows):
            f.write(json.dumps({"step": i + 1, "time": start_time + (i + 1) * 2.0, **row}) + "\n")
    return path


def rising_run(n: int = 40, *, offset: float = 0.0) -> list[dict]:
    """Synthetic metrics of a run whose reward climbs from ~0.05 to ~0.95 (deterministic)."""
    rows = []
    for i in range(n):
        frac = i / max(1, n - 1)
        rows.append(
            {
                "critic/score/mean": 0.05 + 0.9 * frac + offset + 0.02 * ((-1) ** i),
                "actor/kl": 0.001 * i,
                "actor/entropy": 2.0 - frac,
                "response_length/mean": 3.0 + (i % 3),
                "timing_s/step": 2.0,
            }
        )
    return rows
