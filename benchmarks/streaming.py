"""Streaming k = 1 against sync on the tiny recipe in Ray mode (rlctl/bench/streaming.py).

    python benchmarks/streaming.py [--recipe recipes/tiny_grpo.toml] [--k 1] [--out DIR]
                                   [--json] [-s KEY=VALUE ...]

Runs sync (placed as the recipe says: colocated), then streaming with
``resources.placement = "split"`` (rollout on a device of its own, training on the rest;
``--placement colocate`` keeps the recipe's), as ``rlctl train`` subprocesses of this process,
and prints steps/s, the time until the 10-step mean reward first reaches 0.6, the reward bar,
where each mode's workers ran and where each mode's step time goes (docs/streaming.md has
figures from one run). ``--sync-s`` / ``--stream-s`` override one mode only.
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
                        help="where streaming runs (sync runs as the recipe places it)")
    parser.add_argument("--sync-s", dest="sync_overrides", action="append", default=[],
                        help="recipe override for the sync run only")
    parser.add_argument("--stream-s", dest="stream_overrides", action="append", default=[],
                        help="recipe override for the streaming run only")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="rlctl-bench-streaming-"))
    common = [x for o in args.overrides for x in ("-s", o)]
    stream_args = [*common, *streaming_overrides(args.k)]
    if args.placement == "split":
        stream_args += split_overrides(args.recipe, stream_args)
    stream_args += [x for o in args.stream_overrides for x in ("-s", o)]
    load = os.getloadavg()[0]
    sync = run_mode(args.recipe, "sync", out,
                    [*common, *(x for o in args.sync_overrides for x in ("-s", o))])
    stream = run_mode(args.recipe, f"stream-k{args.k}", out, stream_args)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, timeout=30, check=False).stdout.strip()
    print(as_json(sync, stream) if args.json else
          f"{args.recipe.name}, Ray mode, {os.cpu_count()} CPUs, load {load:.2f} at start, "
          f"commit {head or '?'}; runs in {out}\n" + report(sync, stream))


if __name__ == "__main__":
    main()
