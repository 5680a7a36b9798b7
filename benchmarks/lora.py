"""LoRA against full fine-tuning on one recipe (rlctl/bench/lora.py).

    python benchmarks/lora.py [--recipe recipes/tiny_grpo.toml] [--lora KEY=VALUE ...]
                              [--merged-steps 10] [--out DIR] [--json] [-s KEY=VALUE ...]

Trains the recipe in full, then with LoRA (``--lora`` overrides, e.g. ``--lora
model.lora.rank=16 --lora algorithm.optim.lr=1e-4``), then the LoRA run again with merged
syncs for a few steps; prints the held-out gain of each, the bytes of checkpoints and syncs,
update and sync time per step and peak RSS, side by side (docs/lora.md has figures and the
commands for the tiny model and the 135M one).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

from rlctl.bench.lora import as_json, compare, held_out_score, report, train

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", type=Path, default=REPO / "recipes" / "tiny_grpo.toml")
    parser.add_argument("--lora", action="append", default=[],
                        help="override of the LoRA run only (default: model.lora.rank=16)")
    parser.add_argument("--merged-steps", type=int, default=10,
                        help="steps of the LoRA run with merged syncs (its sync time)")
    parser.add_argument("--out", type=Path, default=None,
                        help="a new directory for the runs (default: a temporary one)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("-s", dest="overrides", action="append", default=[],
                        help="override of every run, e.g. -s schedule.total_steps=60")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="rlctl-bench-lora-"))
    common = [*args.overrides, "schedule.eval_every=0"]
    # a checkpoint at the last step (its bytes); the merged run saves at its own last step
    steps = _total_steps(args.recipe, args.overrides)
    flags = [x for o in [*common, f"schedule.save_every={steps}"] for x in ("-s", o)]
    lora = [x for o in (args.lora or ["model.lora.rank=16"]) for x in ("-s", o)]
    load = os.getloadavg()[0]
    full = train(args.recipe, "full", out, flags)
    adapted = train(args.recipe, "lora", out, [*flags, *lora])
    merged = train(args.recipe, "merged", out, [
        *flags, *lora, "-s", "engines.rollout.lora_sync=merged",
        "-s", f"schedule.total_steps={args.merged_steps}",
        "-s", f"schedule.save_every={args.merged_steps}"])
    lora_overrides = [*args.overrides, *(args.lora or ["model.lora.rank=16"])]
    initial = held_out_score(args.recipe, args.overrides, None)
    full.score = held_out_score(args.recipe, args.overrides, out / "full" / "hf")
    adapted.score = held_out_score(args.recipe, lora_overrides, out / "lora" / "hf")
    sync_bytes = {"adapter": adapted.trained_bytes,  # the adapters' tensors
                  "full": (out / "full" / "hf" / "model.safetensors").stat().st_size}
    ratios = compare(full, adapted, merged, initial, sync_bytes)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, timeout=30, check=False).stdout.strip()
    print(as_json(full, adapted, merged, ratios) if args.json else
          f"{args.recipe.name}, --local, {os.cpu_count()} CPUs, load {load:.2f} at start, "
          f"commit {head or '?'}; runs in {out}\n" + report(full, adapted, merged, ratios))


def _total_steps(recipe: Path, overrides: list[str]) -> int:
    from rlctl.config.pipeline import load_recipe

    return load_recipe([recipe], overrides=overrides).recipe.schedule.total_steps


if __name__ == "__main__":
    main()
