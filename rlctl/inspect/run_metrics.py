"""Reading a run directory: its ``metrics.jsonl``, checkpoints and a one-run summary.

Read-only and light (no matplotlib, no torch): ``rlctl runs list`` and ``rlctl report``
both start here.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"
REWARD = "critic/score/mean"
VAL_REWARD = "val/score/mean"


class RunNotFoundError(FileNotFoundError):
    """A path that is not a run directory (no metrics.jsonl)."""


@dataclass(frozen=True)
class RunMetrics:
    """Every logged step of one run, by step (the last line for a step wins)."""

    run_dir: Path
    records: list[dict[str, Any]]
    skipped_lines: int
    """Lines that did not parse (a crash cut the last line short)."""

    @property
    def steps(self) -> list[int]:
        return [r["step"] for r in self.records]

    def series(self, name: str) -> tuple[list[int], list[float]]:
        """Steps and values of one metric; steps where it is absent or non-finite are skipped."""
        steps, values = [], []
        for record in self.records:
            value = record.get(name)
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
            ):
                steps.append(record["step"])
                values.append(float(value))
        return steps, values


def read_metrics(run_dir: Path | str) -> RunMetrics:
    """Parse ``<run_dir>/metrics.jsonl``; raises :class:`RunNotFoundError` if it is absent."""
    run_dir = Path(run_dir)
    path = run_dir / METRICS_FILE
    if not path.is_file():
        hint = (
            f"{run_dir} does not exist"
            if not run_dir.exists()
            else f"{run_dir} has no {METRICS_FILE}"
        )
        raise RunNotFoundError(
            f"{hint}: pass a run directory (<output_dir>/<run name>, e.g. runs/tiny-grpo) of a "
            "run that logged with the `jsonl` sink"
        )
    by_step: dict[int, dict[str, Any]] = {}
    skipped = 0
    # Bytes, decoded line by line: one line that is not UTF-8 (a torn write, a file
    # overwritten by something else) is skipped and counted instead of failing the run.
    with path.open("rb") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                record = json.loads(line.decode("utf-8"))
                step = int(record["step"])
            except (ValueError, KeyError, TypeError):  # UnicodeDecodeError is a ValueError
                skipped += 1
                continue
            by_step[step] = record  # a resumed run re-logs steps: the later line wins
    return RunMetrics(run_dir, [by_step[s] for s in sorted(by_step)], skipped)


@dataclass(frozen=True)
class RunSummary:
    """What ``runs list`` and ``report`` say about one run."""

    name: str
    path: str
    steps: int
    first_step: int | None
    last_step: int | None
    reward_first10: float | None
    reward_last10: float | None
    last_reward: float | None
    last_val_reward: float | None
    wall_time_s: float | None
    last_checkpoint: int | None
    updated: str | None
    """When metrics.jsonl was last written (UTC, ISO 8601)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def wall_time(metrics: RunMetrics) -> float | None:
    """Seconds from the start of the first logged step to the end of the last.

    ``time`` is stamped when a step is logged, i.e. at its end; the first step's own
    duration (``timing_s/step``) is added back. Includes any downtime before a resume.
    """
    times = [r["time"] for r in metrics.records if isinstance(r.get("time"), (int, float))]
    if not times:
        return None
    first = metrics.records[0].get("timing_s/step")
    return max(times) - min(times) + (first if isinstance(first, (int, float)) else 0.0)


def last_checkpoint_step(run_dir: Path) -> int | None:
    # Local import: rlctl.checkpoint is light, but keep inspect importable on its own.
    from rlctl.checkpoint.manager import CheckpointManager

    latest = CheckpointManager(run_dir).latest()
    return int(latest.name.removeprefix("step_")) if latest is not None else None


def summarize(metrics: RunMetrics, *, name: str | None = None) -> RunSummary:
    _, rewards = metrics.series(REWARD)
    _, val = metrics.series(VAL_REWARD)
    path = metrics.run_dir / METRICS_FILE
    updated = (
        datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).isoformat(timespec="seconds")
        if path.exists()
        else None
    )
    steps = metrics.steps
    return RunSummary(
        name=name or metrics.run_dir.name,
        path=str(metrics.run_dir),
        steps=len(steps),
        first_step=steps[0] if steps else None,
        last_step=steps[-1] if steps else None,
        reward_first10=_mean(rewards[:10]),
        reward_last10=_mean(rewards[-10:]),
        last_reward=rewards[-1] if rewards else None,
        last_val_reward=val[-1] if val else None,
        wall_time_s=wall_time(metrics),
        last_checkpoint=last_checkpoint_step(metrics.run_dir),
        updated=updated,
    )


RUN_MARKERS = (METRICS_FILE, "run_info.json", "checkpoints")


def is_run_dir(path: Path) -> bool:
    """A directory the trainer created: it has metrics, run info or checkpoints."""
    return any((path / marker).exists() for marker in RUN_MARKERS)


def list_runs(output_dir: Path | str, *, warnings: list[str] | None = None) -> list[RunSummary]:
    """Summaries of the run directories directly under ``output_dir``, by name.

    One run that cannot be read must not hide the others: it is left out (or listed with
    what could be read) and a line saying why is appended to ``warnings``.
    """
    notes = warnings if warnings is not None else []
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        raise FileNotFoundError(
            f"{output_dir} is not a directory: pass the output directory that holds run "
            "directories ([run] output_dir, default `runs`)"
        )
    summaries = []
    for entry in sorted(output_dir.iterdir()):
        try:
            if not (entry.is_dir() and is_run_dir(entry)):
                continue
            metrics = (
                read_metrics(entry)
                if (entry / METRICS_FILE).is_file()
                else RunMetrics(entry, [], 0)
            )
            summaries.append(summarize(metrics))
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            notes.append(f"{entry}: cannot read the run ({reason}): left out")
            continue
        if metrics.skipped_lines:
            notes.append(
                f"{entry / METRICS_FILE}: {metrics.skipped_lines} unreadable line(s) skipped "
                "(not UTF-8 JSON with a step)"
            )
    return summaries


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def format_number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_summary(summary: RunSummary) -> str:
    """A few lines of text about one run (printed by ``rlctl report``)."""
    span = f" ({summary.first_step}-{summary.last_step})" if summary.steps else ""
    lines = [
        f"{summary.name}: {summary.steps} steps{span}, wall {format_duration(summary.wall_time_s)}"
    ]
    if summary.reward_last10 is not None:
        ratio = ""
        if summary.reward_first10 and summary.reward_first10 > 0:
            ratio = f" (x{summary.reward_last10 / summary.reward_first10:.1f})"
        lines.append(
            f"  reward {REWARD}: first 10 {format_number(summary.reward_first10)} -> "
            f"last 10 {format_number(summary.reward_last10)}{ratio}"
        )
    else:
        lines.append(f"  reward {REWARD}: not logged")
    if summary.last_val_reward is not None:
        lines.append(f"  validation {VAL_REWARD}: last {format_number(summary.last_val_reward)}")
    if summary.last_checkpoint is not None:
        lines.append(f"  last checkpoint: step {summary.last_checkpoint}")
    return "\n".join(lines)
