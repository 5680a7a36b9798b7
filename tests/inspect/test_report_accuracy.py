"""``rlctl report``'s held-out accuracy panel: which metric it plots, and that it is drawn."""

from __future__ import annotations

import json
from pathlib import Path

from rlctl.inspect.report import accuracy_metric, build_report
from rlctl.inspect.run_metrics import RunMetrics


def _run(records: list[dict]) -> RunMetrics:  # type: ignore[type-arg]
    return RunMetrics(run_dir=Path("r"), records=records, skipped_lines=0)


def test_greedy_validation_is_plotted_as_pass_at_1_and_sampled_as_mean_at_k() -> None:
    assert accuracy_metric(_run([{"step": 5, "val/pass@1": 0.4}])) == "val/pass@1"
    sampled = [{"step": 5, "val/mean@4": 0.3, "val/mean@4/ci_low": 0.2, "val/pass@4": 0.6}]
    assert accuracy_metric(_run(sampled)) == "val/mean@4"


def test_a_run_with_accuracy_gets_a_report_with_the_panel(tmp_path) -> None:  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    run.mkdir()
    rows = [{"step": s, "time": float(s), "critic/score/mean": s / 10, "val/pass@1": s / 20,
             "val/pass@1/ci_low": s / 30, "val/pass@1/ci_high": s / 15} for s in (0, 5, 10)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = build_report([run], tmp_path / "report.png")
    assert report.output.is_file() and report.output.stat().st_size > 10_000
