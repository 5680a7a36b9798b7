"""``rlctl report``: PNG plots of a run's key curves, several runs overlaid.

Panels (verl metric names): reward ``critic/score/mean``, KL ``actor/kl``, entropy
``actor/entropy``, response length ``response_length/mean``, step time ``timing_s/step``,
validation reward ``val/score/mean`` and held-out accuracy ``val/pass@1`` (greedy; its 95%
interval shaded; a run validating with k sampled responses shows ``val/mean@k`` instead).
Uses matplotlib's object API with the Agg canvas (no pyplot, no display needed).

The PNG carries a text chunk (:data:`REPORT_KEY`) so that a later report may replace it;
any other existing file is left alone unless ``overwrite``, and a directory always is.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rlctl.inspect.run_metrics import (
    METRICS_FILE,
    RunMetrics,
    RunNotFoundError,
    RunSummary,
    format_summary,
    read_metrics,
    summarize,
)

# (metric, panel title, y label)
PANELS: tuple[tuple[str, str, str], ...] = (
    ("critic/score/mean", "reward", "critic/score/mean"),
    ("actor/kl", "KL to reference", "actor/kl"),
    ("actor/entropy", "entropy", "actor/entropy"),
    ("response_length/mean", "response length", "tokens"),
    ("timing_s/step", "step time", "seconds"),
    ("val/score/mean", "validation reward", "val/score/mean"),
    ("val/pass@1", "held-out accuracy", "val/pass@1 (95% interval)"),
)
ACCURACY = "val/pass@1"
# Above this many points a curve is drawn faint with a moving average on top.
SMOOTH_ABOVE = 30
# PNG text chunk that marks a file as an rlctl report (so a re-run may replace it).
REPORT_KEY = "rlctl-report"


class ReportTargetError(ValueError):
    """The output path holds something a report must not replace."""


@dataclass(frozen=True)
class Report:
    output: Path
    summaries: list[RunSummary]
    text: str
    warnings: list[str] = field(default_factory=list)
    """Runs or lines that could not be read (the report shows the rest)."""


def is_report(path: Path) -> bool:
    """Whether ``path`` is a PNG an earlier ``rlctl report`` wrote."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return image.format == "PNG" and REPORT_KEY in image.info
    except (OSError, UnidentifiedImageError, ValueError):
        return False


def check_report_target(output: Path, *, overwrite: bool = False) -> None:
    """Raise :class:`ReportTargetError` if writing ``output`` would lose data."""
    if output.is_dir():
        raise ReportTargetError(
            f"report output {output} is a directory: pass the path of a PNG file, e.g. "
            f"{output / 'report.png'}"
        )
    for parent in output.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ReportTargetError(f"report output {output}: {parent} is not a directory")
            break
    if (output.exists() or output.is_symlink()) and not overwrite and not is_report(output):
        raise ReportTargetError(
            f"report output {output} exists and is not an earlier rlctl report: pass another "
            "path, or --overwrite to replace it"
        )


def run_labels(run_dirs: Sequence[Path]) -> list[str]:
    """Shortest distinct labels: the directory name, with parents added while names clash."""
    paths = [Path(p).resolve() for p in run_dirs]
    depth = 1
    while True:
        labels = ["/".join(p.parts[-depth:]) for p in paths]
        if len(set(labels)) == len(labels) or depth >= max(len(p.parts) for p in paths):
            return labels
        depth += 1


def moving_average(values: list[float], window: int) -> list[float]:
    """Centred mean over ``window`` points, narrower at the ends (same length as ``values``).

    Centred, not trailing: a trailing mean lags, which would shift a trend to the right.
    """
    half = window // 2
    prefix = [0.0]
    for value in values:
        prefix.append(prefix[-1] + value)
    out = []
    for i in range(len(values)):
        lo, hi = max(0, i - half), min(len(values), i + half + 1)
        out.append((prefix[hi] - prefix[lo]) / (hi - lo))
    return out


def accuracy_metric(run: RunMetrics) -> str:
    """``val/pass@1`` when the run logged it, else its ``val/mean@k`` (sampled validation)."""
    names = {k for record in run.records for k in record}
    if ACCURACY in names:
        return ACCURACY
    sampled = sorted(k for k in names if k.startswith("val/mean@") and "/ci_" not in k)
    return sampled[0] if sampled else ACCURACY


def _interval(ax, run: RunMetrics, name: str, color: str) -> None:  # type: ignore[no-untyped-def]
    """Shade the 95% interval of accuracy metric ``name`` where the run logged it."""
    low_steps, low = run.series(f"{name}/ci_low")
    high_steps, high = run.series(f"{name}/ci_high")
    if low_steps and low_steps == high_steps:
        ax.fill_between(low_steps, low, high, color=color, alpha=0.15, linewidth=0)


def _panel(ax, panel: tuple[str, str, str], runs: list[RunMetrics], labels: list[str],  # type: ignore[no-untyped-def]
           colors: list[str]) -> None:
    """One panel: each run's curve of the panel's metric (smoothed when long)."""
    metric, title, ylabel = panel
    plotted = False
    for run, label, color in zip(runs, labels, colors, strict=True):
        name = accuracy_metric(run) if metric == ACCURACY else metric
        steps, values = run.series(name)
        if not steps:
            continue
        plotted = True
        if metric == ACCURACY:
            _interval(ax, run, name, color)
        if len(values) > SMOOTH_ABOVE:
            window = max(5, len(values) // 25)
            ax.plot(steps, values, color=color, alpha=0.3, linewidth=0.8)
            ax.plot(steps, moving_average(values, window), color=color, linewidth=1.8, label=label)
        else:
            ax.plot(steps, values, color=color, marker="o", markersize=3, linewidth=1.5,
                    label=label)
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if not plotted:
        ax.text(0.5, 0.5, f"{metric}\nnot logged", ha="center", va="center",
                transform=ax.transAxes, color="gray")
    elif len(runs) > 1:
        ax.legend(fontsize="small")


def build_report(
    run_dirs: Sequence[Path | str], output: Path | str, *, overwrite: bool = False
) -> Report:
    """Plot every run of ``run_dirs`` into one PNG at ``output``; returns the summaries.

    A missing run directory raises :class:`RunNotFoundError`; a run whose metrics cannot be
    read (permissions, not a file system one can read) is left out with a warning.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not run_dirs:
        raise ValueError("build_report needs at least one run directory")
    output = Path(output)
    check_report_target(output, overwrite=overwrite)
    runs: list[RunMetrics] = []
    warnings: list[str] = []
    for run_dir in run_dirs:
        try:
            runs.append(read_metrics(run_dir))
        except RunNotFoundError:
            raise
        except OSError as exc:
            warnings.append(
                f"{run_dir}: cannot read {METRICS_FILE} ({exc.strerror or exc}): left out"
            )
    if not runs:
        raise RunNotFoundError("no run could be read: " + "; ".join(warnings))
    labels = run_labels([r.run_dir for r in runs])
    summaries = [summarize(r, name=label) for r, label in zip(runs, labels, strict=True)]

    fig = Figure(figsize=(15, 8.5), layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.subplots(2, 4).flatten()
    grid[-1].set_axis_off()  # seven panels on a 2 x 4 grid
    axes = grid[: len(PANELS)]
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for ax, panel in zip(axes, PANELS, strict=True):
        _panel(ax, panel, runs, labels, colors)
    fig.suptitle("rlctl report: " + ", ".join(labels))

    output.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the target, then renamed over it: a failed save leaves the old file.
    tmp = output.with_name(f".{output.name}.{secrets.token_hex(4)}.tmp")
    try:
        fig.savefig(tmp, dpi=100, format="png", metadata={REPORT_KEY: "1"})
        check_report_target(output, overwrite=overwrite)  # it may have appeared meanwhile
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    text = "\n".join(format_summary(s) for s in summaries)
    skipped = sum(r.skipped_lines for r in runs)
    if skipped:
        text += f"\n({skipped} unreadable line(s) in {METRICS_FILE} skipped)"
    return Report(output=output, summaries=summaries, text=text, warnings=warnings)
