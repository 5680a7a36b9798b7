"""Fixtures of the run tests (sinks, checkpoints, run inspection). No Ray here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.inspect.synthetic_runs import rising_run, write_metrics


@pytest.fixture
def synthetic_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "runs" / "tiny-grpo"
    write_metrics(run_dir, rising_run())
    return run_dir
