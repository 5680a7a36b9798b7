"""rlctl vs TRL on the same work: seconds per step, generated tokens/s, wall time, ratios.

    python benchmarks/vs_trl.py [--steps 40] [--runs trl,local,ray] [--build-env] [--json]
    python benchmarks/vs_trl.py --workload real [--steps 30] [--runs trl,local]

``--workload real`` compares the two on ``recipes/smollm2_grpo.toml`` (the converted
SmolLM2-135M-Instruct learning 2-digit sums, 16 prompts x 4 samples, 16 new tokens, lr 1e-5,
beta 0; ``rlctl models install smollm2-135m`` first) and then scores the base model and each
framework's trained model with ``rlctl eval`` on the same 64 held-out questions (greedy
pass@1): the speed *and* what the steps bought. Validation during rlctl's run is turned off
(TRL's has none), so both time the same work.

Three runs, one after another, each a child process of this one: TRL's GRPOTrainer
(``benchmarks/trl_grpo.py`` in the TRL env that ``benchmarks/build_trl_env.sh`` builds;
``--build-env`` runs that first), ``rlctl train recipes/tiny_grpo.toml --local`` (every role in
this one process, like TRL, so with the in-process ``memory`` data plane:
``-s data_plane.backend=memory``; the recipe's ``ray`` plane would start a Ray cluster for one
process) and the same recipe in Ray mode (2 FSDP ranks, an ``hf`` rollout actor, the ``ray``
data plane). Same model
(rlctl's offline tiny Qwen3), task (count_digits), reward (digits_match), batch (64 prompts x
8), 3 new tokens, lr and one update per step; nothing is downloaded.

A step's time is the gap between two consecutive steps' log records (so it includes each
framework's own logging); s/step is the median over steps ``skip+1..N`` (the first steps pay
for warm-up), generated tokens/s is the generated tokens of those steps over their summed time,
wall is the whole child process (imports, model build, Ray start, export). The machine's load
average is printed with each run: on a shared machine it moves every number.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECIPES = {"tiny": REPO / "recipes" / "tiny_grpo.toml",
           "real": REPO / "recipes" / "smollm2_grpo.toml"}
RECIPE = RECIPES["tiny"]
TRL_ENV = "trl-1.16.0"  # as benchmarks/build_trl_env.sh names it (a test keeps them in step)
BUILD_SCRIPT = REPO / "benchmarks" / "build_trl_env.sh"
RUNS = ("trl", "local", "ray")
EXIT_USAGE = 2


@dataclass
class RunResult:
    """One framework's figures over the measured steps."""

    name: str
    steps: int
    s_per_step: float  # median over the measured steps
    gen_tokens_per_s: float
    wall_s: float
    reward_last5: float
    load_before: float
    load_after: float
    held_out_pass1: float | None = None  # greedy accuracy of the trained model (--workload real)


def env_python() -> Path:
    root = Path(os.environ.get("RLCTL_ENV_DIR") or Path.home() / ".cache" / "rlctl" / "envs")
    return root / TRL_ENV / "bin" / "python"


def trl_env_ready() -> bool:
    return (env_python().parent.parent / ".rlctl-env-complete").is_file()


def summarise(
    name: str, ends: list[float], gen_tokens: list[float], rewards: list[float], skip: int,
    wall_s: float, loads: tuple[float, float],
) -> RunResult:
    """Figures from per-step end times (seconds, any clock) and per-step generated tokens.

    ``ends[i]`` is when step ``i + 1`` finished; step ``k``'s duration is ``ends[k-1] -
    ends[k-2]``, so the measured steps ``skip+1..N`` need ``skip >= 1``.
    """
    if skip < 1 or len(ends) <= skip:
        raise ValueError(f"{name}: {len(ends)} steps logged, need more than skip={skip}")
    durations = [b - a for a, b in zip(ends[skip - 1 : -1], ends[skip:], strict=True)]
    tokens = gen_tokens[skip:]
    return RunResult(
        name=name,
        steps=len(ends),
        s_per_step=statistics.median(durations),
        gen_tokens_per_s=sum(tokens) / sum(durations),
        wall_s=wall_s,
        reward_last5=statistics.fmean(rewards[-5:]),
        load_before=loads[0],
        load_after=loads[1],
    )


def run_child(cmd: list[str], env: dict[str, str], timeout_s: float, log: Path) -> float:
    """Run ``cmd`` to completion (output to ``log``); returns its wall time in seconds."""
    t0 = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        try:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                  timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"error: {cmd[0]} ... did not finish within {timeout_s:.0f} s "
                             f"(log: {log})") from None
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise SystemExit(f"error: {' '.join(cmd[:4])} ... exited {proc.returncode}:\n{tail}")
    return time.perf_counter() - t0


def run_trl(args: argparse.Namespace, work: Path) -> RunResult:
    out = work / "trl_steps.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # The rlctl source tree for the builders; no hub access at all (everything is built offline).
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    saved = work / "trl-model"
    cmd = [str(env_python()), str(REPO / "benchmarks" / "trl_grpo.py"), "--steps",
           str(args.steps), "--out", str(out), "--recipe", str(args.recipe),
           "--workload", args.workload,
           *(["--save", str(saved)] if args.workload == "real" else [])]
    load0 = os.getloadavg()[0]
    wall = run_child(cmd, env, args.timeout_s, work / "trl.log")
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    steps = [r for r in rows if "step" in r]
    samples = _samples_per_step(args.recipe)
    result = summarise(
        f"trl {TRL_ENV.removeprefix('trl-')}", [r["t"] for r in steps],
        [r["completion_len"] * samples for r in steps], [r["reward"] for r in steps],
        args.skip, wall, (load0, os.getloadavg()[0]),
    )
    if args.workload == "real":
        result.held_out_pass1 = held_out_pass1(args, work, str(saved), "trl")
    return result


def held_out_pass1(args: argparse.Namespace, work: Path, model: str, name: str) -> float:
    """Greedy pass@1 of ``model`` on the recipe's held-out questions, by ``rlctl eval``."""
    out = work / f"eval-{name}.json"
    cmd = [sys.executable, "-m", "rlctl", "eval", str(args.recipe), "--model", model,
           "--out", str(out)]
    run_child(cmd, dict(os.environ), args.timeout_s, work / f"eval-{name}.log")
    result = json.loads(out.read_text(encoding="utf-8"))
    return float(result["passes"][0]["metrics"]["pass@1"])


def run_rlctl(args: argparse.Namespace, work: Path, local: bool) -> RunResult:
    name = "local" if local else "ray"
    cmd = [sys.executable, "-m", "rlctl", "train", str(args.recipe), "--quiet",
           "-s", f"schedule.total_steps={args.steps}", "-s", f'run.output_dir="{work}"',
           "-s", f'run.name="{name}"', "-s", "schedule.eval_every=0",
           *(["--local", "-s", "data_plane.backend=memory"] if local else [])]
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    load0 = os.getloadavg()[0]
    wall = run_child(cmd, env, args.timeout_s, work / f"{name}.log")
    metrics = work / name / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if "timing_s/step" in r]  # training steps (not validation rows)
    samples = _samples_per_step(args.recipe)
    result = summarise(
        f"rlctl {'--local' if local else 'ray (2 ranks)'}", [r["time"] for r in rows],
        [r["response_length/mean"] * samples for r in rows],
        [r["critic/score/mean"] for r in rows], args.skip, wall, (load0, os.getloadavg()[0]),
    )
    if args.workload == "real":
        result.held_out_pass1 = held_out_pass1(args, work, str(work / name / "hf"), name)
    return result


def _samples_per_step(recipe: Path = RECIPE) -> int:
    import tomllib

    with recipe.open("rb") as f:
        alg = tomllib.load(f)["algorithm"]
    return int(alg["prompts_per_step"]) * int(alg["group_size"])


TITLES = {
    "tiny": "tiny Qwen3 (76k params), count_digits, 3 new tokens",
    "real": "SmolLM2-135M-Instruct (fp32), 2-digit sums (reasoning-gym), 16 new tokens",
}


def format_table(results: list[RunResult], args: argparse.Namespace,
                 base_pass1: float | None = None) -> str:
    ref = next((r for r in results if r.name.startswith("trl")), None)
    title = (
        f"rlctl vs TRL: {TITLES[args.workload]}, {_samples_per_step(args.recipe)} samples/step, "
        f"{args.steps} steps; s/step = median of steps {args.skip + 1}..{args.steps}"
    )
    real = args.workload == "real"
    header = (
        f"{'run':<22}{'s/step':>8}{'gen tok/s':>11}{'wall s':>9}{'reward':>8}"
        f"{'tok/s vs trl':>14}{'load':>11}" + (f"{'held-out':>10}" if real else "")
    )
    lines = [title, header]
    for r in results:
        ratio = f"{r.gen_tokens_per_s / ref.gen_tokens_per_s:.2f}x" if ref else "-"
        held = f"{r.held_out_pass1:>10.3f}" if real and r.held_out_pass1 is not None else ""
        lines.append(
            f"{r.name:<22}{r.s_per_step:>8.3f}{r.gen_tokens_per_s:>11.0f}{r.wall_s:>9.1f}"
            f"{r.reward_last5:>8.3f}{ratio:>14}{r.load_before:>5.1f}->{r.load_after:<4.1f}"
            + held
        )
    lines.append("reward: critic/score mean of the last 5 steps; load: 1-min load average "
                 "before -> after the run")
    if real:
        base = f"{base_pass1:.3f}" if base_pass1 is not None else "not measured"
        lines.append(f"held-out: greedy pass@1 on the recipe's 64 held-out questions (rlctl "
                     f"eval) after the last step; the base model: {base}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=tuple(RECIPES), default="tiny",
                        help="tiny: recipes/tiny_grpo.toml; real: recipes/smollm2_grpo.toml")
    parser.add_argument("--steps", type=int, default=40, help="training steps per run (N)")
    parser.add_argument("--skip", type=int, default=5, help="warm-up steps left out of s/step")
    parser.add_argument("--runs", default=",".join(RUNS), help="comma list of trl, local, ray")
    parser.add_argument("--build-env", action="store_true",
                        help="build the TRL env first (benchmarks/build_trl_env.sh)")
    parser.add_argument("--timeout-s", type=float, default=1800, help="limit per run")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep logs and metrics in this new directory (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    args.recipe = RECIPES[args.workload]
    args.runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    bad = [r for r in args.runs if r not in RUNS]
    if bad or not args.runs:
        parser.exit(EXIT_USAGE, f"error: --runs: unknown {bad or 'empty list'}; choose from "
                                f"{', '.join(RUNS)}\n")
    if args.skip < 1 or args.steps <= args.skip:
        parser.exit(EXIT_USAGE, f"error: need --steps > --skip >= 1 (got --steps {args.steps}, "
                                f"--skip {args.skip})\n")
    if args.keep is not None and args.keep.exists():
        parser.exit(EXIT_USAGE, f"error: --keep {args.keep} exists; name a new directory\n")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "trl" in args.runs and not trl_env_ready():
        if not args.build_env:
            print(f"error: no TRL env at {env_python().parent.parent}\n  fix: run with "
                  f"--build-env, or `bash {BUILD_SCRIPT.relative_to(REPO)}` (a few minutes)",
                  file=sys.stderr)
            return EXIT_USAGE
        subprocess.run(["bash", str(BUILD_SCRIPT)], check=True, timeout=3600)
    work = args.keep or Path(tempfile.mkdtemp(prefix="rlctl-vs-trl-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    base_pass1 = None
    try:
        if args.workload == "real":
            base_pass1 = held_out_pass1(args, work, "smollm2-135m", "base")
        for run in args.runs:
            if run == "trl":
                results.append(run_trl(args, work))
            else:
                results.append(run_rlctl(args, work, local=(run == "local")))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)  # our own temp dir, nothing else
    if args.json:
        print(json.dumps({"workload": args.workload, "steps": args.steps, "skip": args.skip,
                          "base_held_out_pass1": base_pass1,
                          "runs": [asdict(r) for r in results]}))
    else:
        print(format_table(results, args, base_pass1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
