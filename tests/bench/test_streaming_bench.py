"""The streaming benchmark's arithmetic on metric rows written out by hand."""

from __future__ import annotations

import pytest

from rlctl.bench.streaming import compare, report, streaming_overrides, summarize


def _rows(rewards, step_s, **phases):
    return [{"step": i + 1, "critic/score/mean": r, "timing_s/step": step_s,
             **{f"timing_s/{k}": v for k, v in phases.items()}} for i, r in enumerate(rewards)]


REWARDS = [0.1, 0.1, 0.1] + [0.5] * 7 + [0.7] * 10  # 20 steps


def test_summary_finds_the_first_window_at_the_target_and_checks_the_bar():
    s = summarize("sync", _rows(REWARDS, 2.0, gen=1.5, update_actor=0.5))
    assert s.steps == 20 and s.step_time_s == 40.0 and s.steps_per_s == 0.5
    # windows ending at steps 10..20: the mean first reaches 0.6 at step 15 (5 x 0.5 + 5 x 0.7)
    assert s.step_to_reward == 15 and s.time_to_reward_s == 30.0
    assert s.first3 == pytest.approx(0.1) and s.last10 == pytest.approx(0.7) and s.meets_bar
    assert s.breakdown == {"gen": 1.5, "step": 2.0, "update_actor": 0.5}


def test_a_run_that_never_learns_misses_the_bar_and_has_no_time_to_reward():
    s = summarize("stream-k1", _rows([0.3] * 12, 1.0))
    assert s.step_to_reward is None and s.time_to_reward_s is None and not s.meets_bar
    with pytest.raises(ValueError, match="needs 10"):
        summarize("short", _rows([0.3] * 9, 1.0))


def test_ratios_and_report():
    sync = summarize("sync", _rows(REWARDS, 2.0, gen=1.5))
    stream = summarize("stream-k1", _rows(REWARDS, 1.6, gen=0.3, wait_train=0.2))
    ratios = compare(sync, stream)
    assert ratios["steps_per_s"] == pytest.approx(2.0 / 1.6)
    assert ratios["time_to_reward_speedup"] == pytest.approx(30.0 / 24.0)
    text = report(sync, stream)
    assert "streaming / sync steps/s: 1.250x" in text and "wait_train" in text
    assert streaming_overrides(2)[-1] == "algorithm.staleness.options.max_staleness=2"
