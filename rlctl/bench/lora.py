"""LoRA against full fine-tuning on one recipe: three runs, side by side.

The runs are ``rlctl train --local`` subprocesses of one benchmark process, one after the
other, with the same seed (``--local``: every role in the run's own process, so its peak RSS
is the run's memory):

* ``full``: the recipe as given (every weight trains, the full weights move at each sync);
* ``lora``: the same with the LoRA overrides (``[model.lora]``, adapter-only sync);
* ``merged``: the LoRA run again with ``lora_sync = "merged"``, for a few steps (its syncs).

From them:

* **held-out gain**: the greedy score on the validation prompts (the first ``data.val_size``
  of a task's validation split, or the validation files) of the final policy (the run's ``hf/``
  export) minus the initial policy's, with the run's own rewards; LoRA's gain over full
  fine-tuning's is the bar (at least 0.8);
* **bytes**: the actor's checkpoint (weights or adapters, optimizer state), what one sync
  moves (the adapters' tensors, against the full model's safetensors from its ``hf/``
  export), the optimizer state alone;
* **time**: mean seconds per step of the actor update and of the weight sync (first step
  left out: it warms up), and the peak RSS of each run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

RUN_TIMEOUT_S = 4 * 3600.0
"""One run may take this long before the benchmark gives up on it."""


@dataclass
class RunSummary:
    """What one run measured."""

    name: str
    steps: int
    update_s: float
    """Mean ``timing_s/update_actor`` (steps 2..N)."""
    sync_s: float
    """Mean ``timing_s/update_weights`` (steps 2..N)."""
    peak_rss_mb: float
    checkpoint_bytes: int
    """The actor's last checkpoint (``train/actor``: weights or adapters, optimizer state)."""
    optimizer_bytes: int
    """Its optimizer state alone."""
    trained_bytes: int
    """Its trained tensors alone (the adapters: what an adapter sync moves)."""
    score: float | None = None
    """Held-out greedy score of the final policy (``None``: not evaluated)."""
    wall_s: float = 0.0


def train(recipe: Path, name: str, out_dir: Path, overrides: Sequence[str]) -> RunSummary:
    """``rlctl train --local`` into ``out_dir/name`` (a checkpoint at the end) and its
    summary."""
    cmd = [sys.executable, "-m", "rlctl", "train", str(recipe), "--local", "--quiet",
           "-s", f"run.output_dir={out_dir}", "-s", f"run.name={name}", *overrides]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=dict(os.environ))
    deadline = started + RUN_TIMEOUT_S
    while True:  # os.wait4 gives this child's own rusage (its peak RSS)
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise TimeoutError(f"run {name} took more than {RUN_TIMEOUT_S:.0f} s")
        time.sleep(0.5)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"run {name} failed with exit code {proc.returncode}: {cmd}")
    run_dir = out_dir / name
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    later = rows[1:] or rows
    ckpt = run_dir / "checkpoints" / f"step_{rows[-1]['step']}" / "train" / "actor"
    return RunSummary(
        name=name, steps=len(rows),
        update_s=_mean(r.get("timing_s/update_actor", 0.0) for r in later),
        sync_s=_mean(r["timing_s/update_weights"] for r in later),
        peak_rss_mb=usage.ru_maxrss / 1024,  # KiB on Linux
        checkpoint_bytes=_size(ckpt), **_state_bytes(ckpt),
        wall_s=time.monotonic() - started)


def held_out_score(recipe: Path, overrides: Sequence[str], model_dir: Path | None) -> float:
    """The greedy validation score of ``model_dir`` (an HF export; ``None``: the recipe's
    initial policy) with the recipe's prompts and rewards."""
    from rlctl.config.pipeline import load_recipe
    from rlctl.engines.rollout.contract import RolloutEngineSpec
    from rlctl.engines.rollout.hf.engine import HFRolloutEngine
    from rlctl.models.loading import load_tokenizer
    from rlctl.registry import get_registry
    from rlctl.rewards.base import RewardInput
    from rlctl.rewards.reward_set import RewardSet
    from rlctl.tasks import tokenize_prompts
    from rlctl.trainer.controller.prompts import open_prompt_source
    from rlctl.trainer.worker.reward_sections import effective_rewards

    # scored by the hf engine whatever the recipe generates with (the same greedy tokens)
    loaded = load_recipe([recipe], overrides=[
        *overrides, 'resources.mode="local"', 'engines.rollout.backend="hf"',
        "engines.rollout.options={}", 'engines.rollout.weight_sync="in_process"',
        "engines.rollout.weight_sync_options={}"])
    r = loaded.recipe
    model = r.model if model_dir is None else r.model.model_copy(
        update={"path": str(model_dir), "tokenizer": None,
                "lora": r.model.lora.model_copy(update={"rank": 0})})
    tokenizer = load_tokenizer(model)
    source = open_prompt_source(r, split="val",
                                task_options=loaded.options_for("data.task_options"))
    count = r.data.val_size if r.data.task else len(source)
    prompts = [p for p, _ in zip(source, range(count), strict=False)]
    ids = tokenize_prompts(prompts, tokenizer, apply_chat_template=r.data.apply_chat_template,
                           max_prompt_tokens=r.data.max_prompt_tokens)
    engine = HFRolloutEngine(replace(RolloutEngineSpec.from_loaded(loaded), model=model,
                                     lora_adapters=None))
    engine.load()
    gens = engine.generate_batch(ids, max_new_tokens=r.rollout.max_new_tokens,
                                 temperature=r.rollout.val_temperature)
    registry = get_registry()
    sections = effective_rewards(r, registry)
    rewards = RewardSet.from_sections(sections, registry, [
        loaded.options_for(f"rewards[{i}].options") for i in range(len(sections))])
    eos = tokenizer.eos_token_id
    scores = [rewards(RewardInput.from_tokens(
        tokenizer, prompt_ids=p_ids, response_ids=g.token_ids, ground_truth=p.ground_truth,
        data_source=p.data_source, eos_token_ids=[eos] if isinstance(eos, int) else eos))
        ["score"] for p, p_ids, g in zip(prompts, ids, gens, strict=True)]
    return sum(scores) / len(scores)


def compare(full: RunSummary, lora: RunSummary, merged: RunSummary, initial: float,
            sync_bytes: dict[str, int]) -> dict[str, Any]:
    """The bar's ratios (LoRA over full fine-tuning)."""
    gain_full = (full.score or 0.0) - initial
    gain_lora = (lora.score or 0.0) - initial
    return {
        "initial_score": initial,
        "gain_full": gain_full, "gain_lora": gain_lora,
        "gain_ratio": gain_lora / gain_full if gain_full > 0 else None,
        "checkpoint_ratio": lora.checkpoint_bytes / full.checkpoint_bytes,
        "sync_bytes": sync_bytes,
        "sync_ratio": sync_bytes["adapter"] / sync_bytes["full"],
        "optimizer_ratio": lora.optimizer_bytes / max(full.optimizer_bytes, 1),
        "update_s": {"full": full.update_s, "lora": lora.update_s},
        "sync_s": {"full": full.sync_s, "adapter": lora.sync_s, "merged": merged.sync_s},
        "peak_rss_mb": {"full": full.peak_rss_mb, "lora": lora.peak_rss_mb},
    }


def report(full: RunSummary, lora: RunSummary, merged: RunSummary,
           ratios: dict[str, Any]) -> str:
    """A plain-text table of the runs and the bar's ratios."""
    def fmt(v: Any, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    lines = [f"{'':34}{'full':>12}{'lora':>12}{'lora merged':>14}"]
    for label, key, spec in [("steps", "steps", "d"), ("held-out score", "score", ".3f"),
                             ("update, s/step", "update_s", ".4f"),
                             ("weight sync, s/step", "sync_s", ".4f"),
                             ("peak RSS, MiB", "peak_rss_mb", ".0f"),
                             ("checkpoint (train/actor), bytes", "checkpoint_bytes", ",d"),
                             ("optimizer state, bytes", "optimizer_bytes", ",d"),
                             ("wall, s", "wall_s", ".0f")]:
        a, b, c = (getattr(s, key) for s in (full, lora, merged))
        lines.append(f"{label:34}{fmt(a, spec):>12}{fmt(b, spec):>12}{fmt(c, spec):>14}")
    sync = ratios["sync_bytes"]
    lines += [
        (f"initial held-out score {ratios['initial_score']:.3f}; gain: full "
        f"{ratios['gain_full']:+.3f}, lora {ratios['gain_lora']:+.3f}, lora / full "
        f"{fmt(ratios['gain_ratio'], '.2f')} (bar: >= 0.80)"),
        (f"one sync moves: adapter {sync['adapter']:,} bytes, full {sync['full']:,} bytes: "
        f"{100 * ratios['sync_ratio']:.2f}% (bar: < 5%)"),
        (f"checkpoint: lora / full {100 * ratios['checkpoint_ratio']:.2f}% (bar: < 5%); "
        f"optimizer state {100 * ratios['optimizer_ratio']:.2f}%"),
    ]
    return "\n".join(lines)


def as_json(full: RunSummary, lora: RunSummary, merged: RunSummary,
            ratios: dict[str, Any]) -> str:
    return json.dumps({"full": asdict(full), "lora": asdict(lora), "merged": asdict(merged),
                       "ratios": ratios}, indent=2)


def _mean(values: Any) -> float:
    values = [float(v) for v in values]
    return sum(values) / len(values) if values else 0.0


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _state_bytes(ckpt: Path) -> dict[str, int]:
    """Bytes of a checkpoint's optimizer-state tensors and of its trained tensors."""
    import torch

    from rlctl.checkpoint import safe_dcp

    full = safe_dcp.load_full(ckpt)
    state = full.get("optimizer", {}).get("state", {})
    return {
        "optimizer_bytes": sum(t.numel() * t.element_size() for moments in state.values()
                               for t in moments.values()
                               if isinstance(t, torch.Tensor) and t.dim() > 0),
        "trained_bytes": sum(t.numel() * t.element_size() for t in full["model"].values()),
    }
