"""Streaming k = 1 against sync on the tiny recipe in Ray mode (rlctl/bench/streaming.py).

    python benchmarks/streaming.py [--recipe recipes/tiny_grpo.toml] [--k 1] [--out DIR]
                                   [--json] [-s KEY=VALUE ...] [--placement split|colocate]
                                   [--sync-placements colocate,split]
                                   [--sync-s KEY=VALUE ...] [--stream-s KEY=VALUE ...]

Runs sync in each placement of ``--sync-placements`` (default both: ``colocate``, as the
recipe places it, generation and training taking turns on all the cores; ``split``, rollout on
a core of its own, training on the rest), then streaming with ``--placement`` (default
``split``), as ``rlctl train`` subprocesses of this process, one after the other. Prints
steps/s, the time until the 10-step mean reward first reaches 0.6, the reward bar, where each
run's time goes and where its workers ran, and streaming's ratios over the faster sync run
(docs/streaming.md has figures from one run). ``--sync-s`` / ``--stream-s`` override one mode
only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

from rlctl.bench.streaming import (
    as_json,
    report,
    run_mode,
    split_overrides,
    streaming_overrides,
)

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", type=Path, default=REPO / "recipes" / "tiny_grpo.toml")
    parser.add_argument("--k", type=int, default=1, help="max_staleness of the streaming run")
    parser.add_argument("--out", type=Path, default=None,
                        help="a new directory for both runs (default: a temporary one)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("-s", dest="overrides", action="append", default=[],
                        help="recipe override for both runs, e.g. -s schedule.total_steps=60")
    parser.add_argument("--placement", choices=["split", "colocate"], default="split",
                        help="where streaming runs")
    parser.add_argument("--sync-placements", default="colocate,split",
                        help="where sync runs (comma-separated; the faster is the baseline)")
    parser.add_argument("--sync-s", dest="sync_overrides", action="append", default=[],
                        help="recipe override for the sync run only")
    parser.add_argument("--stream-s", dest="stream_overrides", action="append", default=[],
                        help="recipe override for the streaming run only")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="rlctl-bench-streaming-"))
    common = [x for o in args.overrides for x in ("-s", o)]
    sync_args = [*common, *(x for o in args.sync_overrides for x in ("-s", o))]
    stream_args = [*common, *streaming_overrides(args.k)]
    stream_args += placed(args.recipe, args.placement, stream_args)
    stream_args += [x for o in args.stream_overrides for x in ("-s", o)]
    load = os.getloadavg()[0]
    syncs = [run_mode(args.recipe, f"sync-{where}", out,
                      [*sync_args, *placed(args.recipe, where, sync_args)])
             for where in args.sync_placements.split(",")]
    stream = run_mode(args.recipe, f"stream-k{args.k}-{args.placement}", out, stream_args)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, timeout=30, check=False).stdout.strip()
    print(as_json(syncs, stream) if args.json else
          f"{args.recipe.name}, Ray mode, {os.cpu_count()} CPUs, load {load:.2f} at start, "
          f"commit {head or '?'}; runs in {out}\n" + report(syncs, stream))


def placed(recipe: Path, where: str, overrides: list[str]) -> list[str]:
    """The overrides that place a run ``where`` (``colocate``: the recipe's own placement)."""
    return split_overrides(recipe, overrides) if where == "split" else \
        ["-s", "resources.placement=colocate"]


if __name__ == "__main__":
    main()
