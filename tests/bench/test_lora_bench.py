"""The LoRA benchmark's arithmetic and its held-out score (rlctl/bench/lora.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlctl.bench.lora import RunSummary, compare, held_out_score, report

TINY = Path(__file__).resolve().parents[2] / "recipes" / "tiny_grpo.toml"


def _run(name: str, **kw: float) -> RunSummary:
    base = {"steps": 150, "update_s": 0.3, "sync_s": 0.005, "peak_rss_mb": 600.0,
            "checkpoint_bytes": 1_000_000, "optimizer_bytes": 600_000, "trained_bytes": 300_000}
    return RunSummary(name=name, **{**base, **kw})  # type: ignore[arg-type]


def test_the_ratios_are_lora_over_full_and_gains_over_the_initial_policy() -> None:
    full = _run("full", score=0.9)
    lora = _run("lora", score=0.75, checkpoint_bytes=40_000, optimizer_bytes=24_000,
                trained_bytes=12_000, update_s=0.2, sync_s=0.004)
    merged = _run("merged", sync_s=0.006)
    ratios = compare(full, lora, merged, initial=0.1,
                     sync_bytes={"adapter": 12_000, "full": 300_000})
    assert ratios["gain_ratio"] == pytest.approx(0.65 / 0.8)
    assert ratios["checkpoint_ratio"] == pytest.approx(0.04)
    assert ratios["sync_ratio"] == pytest.approx(0.04)
    assert ratios["sync_s"] == {"full": 0.005, "adapter": 0.004, "merged": 0.006}
    text = report(full, lora, merged, ratios)
    assert "lora / full 0.81 (bar: >= 0.80)" in text
    assert "4.00% (bar: < 5%)" in text


def test_no_gain_of_full_fine_tuning_gives_no_ratio() -> None:
    ratios = compare(_run("full", score=0.1), _run("lora", score=0.2), _run("merged"),
                     initial=0.1, sync_bytes={"adapter": 1, "full": 2})
    assert ratios["gain_ratio"] is None


@pytest.mark.slow
def test_the_initial_tiny_policy_scores_nothing_on_held_out_prompts() -> None:
    """Greedy answers of the random-init tiny model to the validation prompts: none right
    (the trained recipe reaches 1.0; docs/lora.md)."""
    assert held_out_score(TINY, [], None) == 0.0
