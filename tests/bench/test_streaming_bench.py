"""The streaming benchmark's arithmetic on metric rows written out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlctl.bench.streaming import (
    as_json,
    compare,
    placement_rows,
    report,
    split_overrides,
    streaming_overrides,
    summarize,
)

REPO = Path(__file__).resolve().parents[2]


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
    faster = summarize("sync-split", _rows(REWARDS, 1.8, gen=1.3))
    text = report([sync, faster], stream)
    # the ratio is over the faster sync placement; every run is a column
    assert "stream-k1 / sync-split (the faster sync) steps/s: 1.125x" in text
    assert "wait_train" in text and text.splitlines()[0].split() == ["sync", "sync-split",
                                                                     "stream-k1"]
    assert json.loads(as_json([sync, faster], stream))["baseline"] == "sync-split"
    assert streaming_overrides(2)[-1] == "algorithm.staleness.options.max_staleness=2"


def test_split_gives_rollout_its_own_device_and_training_the_rest():
    # tiny_grpo: 2 CPU devices, one hf rollout worker (one device): one training rank is left
    tiny = REPO / "recipes" / "tiny_grpo.toml"
    assert split_overrides(tiny) == ["-s", "resources.placement=split",
                                     "-s", "engines.train.ranks=1"]
    wider = split_overrides(tiny, ["-s", "resources.devices_per_node=4",
                                   "-s", "engines.rollout.agent_workers=2"])
    assert wider[-1] == "engines.train.ranks=2"
    with pytest.raises(ValueError, match="no training rank"):
        split_overrides(tiny, ["-s", "engines.rollout.agent_workers=2"])


def test_placement_rows_say_which_cores_each_worker_ran_on(tmp_path):
    rows = [{"role": "train", "rank": 0, "resource": "CPU", "devices": ["0"],
             "reported": {"cpus": [0]}},
            {"role": "rollout", "rank": 0, "resource": "CPU", "devices": ["1"],
             "reported": {"cpus": [1]}}]
    (tmp_path / "placement.json").write_text(json.dumps(rows))
    assert placement_rows(tmp_path / "placement.json") == ["train 0: CPU 0", "rollout 0: CPU 1"]
    assert placement_rows(tmp_path / "absent.json") == []
    sync = summarize("sync", _rows(REWARDS, 2.0))
    sync.placement = ["train 0: CPU 0,1"]
    assert "placement, sync: train 0: CPU 0,1" in report([sync],
                                                         summarize("s", _rows(REWARDS, 1)))
