"""Streaming (bounded staleness k) against sync training: the same recipe, two runs, ratios.

Both runs are ``rlctl train`` subprocesses of one benchmark process, run one after the
other on the same machine (so neither competes with the other for cores). Each mode runs on
its own best placement: sync as the recipe places it (``colocate``: generation and training
take turns on all the devices), streaming with ``resources.placement = "split"`` (rollout on
devices of its own, training on the rest: :func:`split_overrides`), the point of streaming
being that both run at once. Each run's ``placement.json`` says which cores (devices) every
worker got; the report prints them. Each run's
``metrics.jsonl`` gives, per step, its wall time (``timing_s/step``) and where it went (the
other ``timing_s/*`` keys) and the mean reward (``critic/score/mean``). From them:

* **steps/s**: steps / the sum of the step times (start-up and the final save excluded);
* **time to reward**: the summed step time up to the first step whose 10-step mean reward
  reaches the target (0.6 for the tiny recipe);
* **the bar**: the last-10-step mean reward reaches the target and is at least 3x the mean
  of the first 3 steps (the tiny recipe's learning check);
* **breakdown**: the mean seconds per step of each phase. The controller's step is ``gen``
  (the rollout producer's answer: in sync mode the whole generation, streaming only what is
  left of this step's, already generating, plus dispatching later steps) + the training
  phases; ``wait_train`` is the rollout workers' idle time (waiting for the trainer), not
  part of the controller's step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REWARD = "critic/score/mean"
WINDOW = 10
# One whole run may take this long before the benchmark gives up on it (every wait has a bound).
RUN_TIMEOUT_S = 3600.0


@dataclass
class ModeSummary:
    """What one run's metrics say."""

    mode: str
    steps: int
    step_time_s: float
    """Sum of ``timing_s/step`` over the run."""
    steps_per_s: float
    time_to_reward_s: float | None
    """Summed step time up to the first step whose 10-step mean reward reaches the target."""
    step_to_reward: int | None
    first3: float
    last10: float
    meets_bar: bool
    breakdown: dict[str, float] = field(default_factory=dict)
    """Mean seconds per step of each ``timing_s/*`` phase (``step`` included)."""
    wall_s: float | None = None
    """The whole process, start-up and final save included."""
    staleness_mean: float | None = None
    placement: list[str] = field(default_factory=list)
    """Where each worker ran (``placement.json``): ``train 0: cores 0``, ..."""


def summarize(mode: str, rows: Sequence[dict[str, Any]], target: float = 0.6,
              wall_s: float | None = None) -> ModeSummary:
    """One run's summary from its metric rows (one dict per step, in step order)."""
    if len(rows) < WINDOW:
        raise ValueError(f"{mode}: {len(rows)} steps logged; the reward window needs {WINDOW}")
    times = [float(r["timing_s/step"]) for r in rows]
    rewards = [float(r[REWARD]) for r in rows]
    total = sum(times)
    reached = next((i for i in range(WINDOW - 1, len(rows))
                    if sum(rewards[i - WINDOW + 1:i + 1]) / WINDOW >= target), None)
    first3 = sum(rewards[:3]) / 3
    last10 = sum(rewards[-WINDOW:]) / WINDOW
    phases = sorted({k for r in rows for k in r if k.startswith("timing_s/")})
    breakdown = {k.removeprefix("timing_s/"): sum(float(r.get(k, 0.0)) for r in rows) / len(rows)
                 for k in phases}
    stale = [float(r["streaming/staleness_mean"]) for r in rows if "streaming/staleness_mean" in r]
    return ModeSummary(
        mode=mode, steps=len(rows), step_time_s=total, steps_per_s=len(rows) / total,
        time_to_reward_s=None if reached is None else sum(times[:reached + 1]),
        step_to_reward=None if reached is None else int(rows[reached]["step"]),
        first3=first3, last10=last10,
        meets_bar=last10 >= target and last10 >= 3 * first3,
        breakdown=breakdown, wall_s=wall_s,
        staleness_mean=sum(stale) / len(stale) if stale else None,
    )


def compare(sync: ModeSummary, stream: ModeSummary) -> dict[str, float | None]:
    """Streaming over sync: > 1 is better for both ratios."""
    to_reward = None
    if sync.time_to_reward_s is not None and stream.time_to_reward_s is not None:
        to_reward = sync.time_to_reward_s / stream.time_to_reward_s
    return {"steps_per_s": stream.steps_per_s / sync.steps_per_s,
            "time_to_reward_speedup": to_reward}


def run_mode(recipe: Path, mode: str, out_dir: Path, overrides: Sequence[str]) -> ModeSummary:
    """``rlctl train recipe`` into ``out_dir/mode`` and its summary."""
    cmd = [sys.executable, "-m", "rlctl", "train", str(recipe), "--quiet",
           "-s", f"run.output_dir={out_dir}", "-s", f"run.name={mode}", *overrides]
    started = time.monotonic()
    subprocess.run(cmd, check=True, timeout=RUN_TIMEOUT_S, env=dict(os.environ))
    wall = time.monotonic() - started
    path = out_dir / mode / "metrics.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    summary = summarize(mode, rows, wall_s=wall)
    summary.placement = placement_rows(out_dir / mode / "placement.json")
    return summary


def placement_rows(path: Path) -> list[str]:
    """``role rank: cores ...`` per worker, from a run's ``placement.json`` (what each process
    reported it may run on); none without the file (``--local``)."""
    if not path.exists():
        return []
    rows = json.loads(path.read_text())
    def seen(r: dict[str, Any]) -> str:  # CPU: the cores the process may run on
        return ",".join(map(str, r["reported"]["cpus"] if r["resource"] == "CPU"
                            else r["devices"]))

    return [f"{r['role']} {r['rank']}: {r['resource']} {seen(r)}" for r in rows]


STREAMING = ("-s", "algorithm.staleness.policy=bounded",
             "-s", "algorithm.staleness.options.max_staleness={k}")


def streaming_overrides(k: int) -> list[str]:
    return [part.format(k=k) for part in STREAMING]


def split_overrides(recipe: Path, overrides: Sequence[str] = ()) -> list[str]:
    """``-s`` overrides that run ``recipe`` (with ``overrides``, ``-s KEY=VALUE`` pairs)
    split: rollout (and reward-model) workers on devices of their own, as many training ranks
    as the devices left give."""
    from rlctl.config.pipeline import load_recipe
    from rlctl.config.placement import placement_of
    from rlctl.registry import get_registry

    loaded = load_recipe([recipe], list(overrides[1::2]))
    plan = placement_of(loaded.recipe, get_registry(),
                        loaded.options_for("engines.rollout.options"))
    res = loaded.recipe.resources
    others = sum(len(s.devices) for s in plan.seats if s.role != "train")
    ranks = res.nodes * res.devices_per_node - others
    if ranks < 1:
        raise ValueError(f"{recipe}: the rollout and reward workers take all "
                         f"{res.nodes * res.devices_per_node} devices; split leaves no training "
                         "rank (raise resources.devices_per_node)")
    return ["-s", "resources.placement=split", "-s", f"engines.train.ranks={ranks}"]


def best_sync(syncs: Sequence[ModeSummary]) -> ModeSummary:
    """Sync's baseline: the fastest (steps/s) of its placements."""
    return max(syncs, key=lambda m: m.steps_per_s)


def report(syncs: Sequence[ModeSummary], stream: ModeSummary) -> str:
    """A plain-text table of every run (a column each) and streaming's ratios over the best
    sync run."""
    runs = [*syncs, stream]
    base = best_sync(syncs)
    ratios = compare(base, stream)

    def fmt(v: float | None, spec: str = ".2f") -> str:
        return "-" if v is None else format(v, spec)

    def row(label: str, values: Sequence[Any], spec: str) -> str:
        return f"{label:28}" + "".join(f"{fmt(v, spec):>16}" for v in values)

    lines = [f"{'':28}" + "".join(f"{m.mode:>16}" for m in runs)]
    for label, attr, spec in [
        ("steps/s", "steps_per_s", ".3f"),
        ("step time, total (s)", "step_time_s", ".1f"),
        ("wall time, process (s)", "wall_s", ".1f"),
        ("time to 10-step mean 0.6 (s)", "time_to_reward_s", ".1f"),
        ("step reaching it", "step_to_reward", "d"),
        ("reward, first 3 steps", "first3", ".3f"),
        ("reward, last 10 steps", "last10", ".3f"),
        ("staleness, mean", "staleness_mean", ".2f"),
    ]:
        lines.append(row(label, [getattr(m, attr) for m in runs], spec))
    lines.append(f"{'meets the bar':28}" + "".join(f"{m.meets_bar!s:>16}" for m in runs))
    lines.append("mean seconds per step, by phase:")
    for phase in sorted(set().union(*(m.breakdown for m in runs))):
        lines.append(row(f"  {phase}", [m.breakdown.get(phase) for m in runs], ".3f"))
    lines += [f"placement, {m.mode}: {'; '.join(m.placement)}" for m in runs if m.placement]
    lines.append(f"{stream.mode} / {base.mode} (the faster sync) steps/s: "
                 f"{ratios['steps_per_s']:.3f}x; time to reward: "
                 f"{fmt(ratios['time_to_reward_speedup'], '.3f')}x faster")
    return "\n".join(lines)


def as_json(syncs: Sequence[ModeSummary], stream: ModeSummary) -> str:
    base = best_sync(syncs)
    return json.dumps({"sync": [asdict(m) for m in syncs], "streaming": asdict(stream),
                       "baseline": base.mode, "ratios": compare(base, stream)}, indent=2)
