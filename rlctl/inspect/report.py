"""``rlctl report``: PNG plots of a run's key curves, several runs overlaid.

Panels (verl metric names): reward ``critic/score/mean``, KL ``actor/kl``, entropy
``actor/entropy``, response length ``response_length/mean``, step time ``timing_s/step``
and validation reward ``val/score/mean``. Uses matplotlib's object API with the Agg
canvas (no pyplot, no display needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rlctl.inspect.run_metrics import (
    RunMetrics,
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
)
# Above this many points a curve is drawn faint with a moving average on top.
SMOOTH_ABOVE = 30


@dataclass(frozen=True)
class Report:
    output: Path
    summaries: list[RunSummary]
    text: str


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


def build_report(run_dirs: Sequence[Path | str], output: Path | str) -> Report:
    """Plot every run of ``run_dirs`` into one PNG at ``output``; returns the summaries."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not run_dirs:
        raise ValueError("build_report needs at least one run directory")
    runs: list[RunMetrics] = [read_metrics(p) for p in run_dirs]
    labels = run_labels([r.run_dir for r in runs])
    summaries = [summarize(r, name=label) for r, label in zip(runs, labels, strict=True)]

    fig = Figure(figsize=(15, 8.5), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 3).flatten()
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for ax, (metric, title, ylabel) in zip(axes, PANELS, strict=True):
        plotted = False
        for run, label, color in zip(runs, labels, colors, strict=True):
            steps, values = run.series(metric)
            if not steps:
                continue
            plotted = True
            if len(values) > SMOOTH_ABOVE:
                window = max(5, len(values) // 25)
                ax.plot(steps, values, color=color, alpha=0.3, linewidth=0.8)
                ax.plot(
                    steps, moving_average(values, window), color=color, linewidth=1.8, label=label
                )
            else:
                ax.plot(
                    steps, values, color=color, marker="o", markersize=3, linewidth=1.5, label=label
                )
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        if not plotted:
            ax.text(
                0.5,
                0.5,
                f"{metric}\nnot logged",
                ha="center",
                va="center",
                transform=ax.transAxes,
                color="gray",
            )
        elif len(runs) > 1:
            ax.legend(fontsize="small")
    fig.suptitle("rlctl report: " + ", ".join(labels))

    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=100, format="png")
    text = "\n".join(format_summary(s) for s in summaries)
    skipped = sum(r.skipped_lines for r in runs)
    if skipped:
        text += f"\n({skipped} unreadable line(s) in metrics.jsonl skipped)"
    return Report(output=output, summaries=summaries, text=text)
