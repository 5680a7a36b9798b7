"""DAPO's pieces and model rewards in real local runs (every role in this process, the tiny
model, real FSDP on gloo, the memory data plane): what each one changes, read from the run's
metrics and rollout dumps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import TinyModelSection
from rlctl.run.entry import Run
from rlctl.trainer.controller.dynamic_sampling import DynamicSamplingExhausted

PROMPTS, N = 8, 8


@pytest.fixture(scope="module")
def rm_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny reward model saved offline (Qwen3ForSequenceClassification, one logit)."""
    from rlctl.models.tiny import build_tiny_reward_model

    out = tmp_path_factory.mktemp("tiny-rm")
    build_tiny_reward_model(TinyModelSection(), seed=3).save_pretrained(out)
    return str(out)


def _rm(rm_dir: str, weight: float = 1.0) -> dict:  # type: ignore[type-arg]
    return {"name": "reward_model", "weight": weight,
            "options": {"path": rm_dir, "dtype": "float32", "micro_batch_size": 5}}


def _dumps(recipe, step: int) -> list[dict]:  # type: ignore[no-untyped-def]
    path = Path(recipe.run.output_dir) / recipe.run.name / "rollouts" / f"step_{step}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_dynamic_sampling_trains_only_groups_whose_rewards_differ(  # type: ignore[no-untyped-def]
    make_recipe, run,
) -> None:
    recipe = make_recipe(
        run={"name": "ds"},
        algorithm={"group_size": N,
                   "dynamic_sampling": {"enabled": True, "prompts_per_draw": 16, "max_draws": 12}},
        logging={"sinks": ["jsonl"], "progress": False, "rollout_dump_samples": 4 * PROMPTS * N},
    )
    rows = run(recipe)
    for row in rows:
        drawn = row["dynamic_sampling/groups_drawn"]
        assert drawn == 16 * row["dynamic_sampling/gen_batches"]
        assert PROMPTS <= row["dynamic_sampling/groups_kept"] <= drawn
    # the filter was at work: some drawn groups scored alike and were dropped
    assert any(r["dynamic_sampling/groups_kept"] < r["dynamic_sampling/groups_drawn"] for r in rows)
    for step in range(1, len(rows) + 1):
        groups: dict[str, list[float]] = {}
        for sample in _dumps(recipe, step):  # every trained sample of the step
            groups.setdefault(sample["key"].split("_")[0], []).append(sample["reward"])
        assert len(groups) == PROMPTS and all(len(g) == N for g in groups.values())
        assert all(max(g) > min(g) for g in groups.values())  # no zero-advantage group left


def test_dynamic_sampling_fails_loudly_past_its_draws(  # type: ignore[no-untyped-def]
    make_recipe,
) -> None:
    # greedy sampling: every response of a group is the same, so no group can be kept
    recipe = make_recipe(run={"name": "dry"}, rollout={"max_new_tokens": 3, "temperature": 0.0},
                         algorithm={"dynamic_sampling": {"enabled": True, "max_draws": 2}})
    with pytest.raises(DynamicSamplingExhausted) as err:
        Run(validate_recipe(recipe), quiet=True).execute()
    assert "2 draws of 8 prompts gave 0 of the 8 groups" in str(err.value)
    assert "(16 of 16 groups scored alike)" in str(err.value)
    assert "algorithm.dynamic_sampling.max_draws" in str(err.value)


def test_overlong_punishment_is_part_of_the_score(  # type: ignore[no-untyped-def]
    make_recipe, run,
) -> None:
    recipe = make_recipe(run={"name": "ol"}, rollout={"max_new_tokens": 4, "temperature": 1.0},
                         algorithm={"overlong": {"buffer_len": 2, "penalty_factor": 0.5}},
                         schedule={"total_steps": 2})
    for row in run(recipe):
        # responses of 3 and 4 tokens lose 0.25 and 0.5; shorter ones nothing
        assert -0.5 <= row["reward/overlong"] < 0
        assert row["critic/score/mean"] == pytest.approx(
            row["reward/digits_match"] + row["reward/overlong"], abs=1e-6)


def test_overlong_filtering_masks_truncated_responses(  # type: ignore[no-untyped-def]
    make_recipe, run, rm_dir,
) -> None:
    # ignore_eos: every response runs to max_new_tokens, so every one is truncated; the
    # reward model scores each differently, so without the filter there is a gradient
    common = {"engines": {"rollout": {"options": {"ignore_eos": True}}},
              "schedule": {"total_steps": 1}, "rewards": [_rm(rm_dir)]}
    masked = run(make_recipe(run={"name": "masked"}, algorithm={"overlong": {"filter": True}},
                             **common))
    plain = run(make_recipe(run={"name": "plain"}, **common))
    assert masked[0]["response_length/clip_ratio"] == plain[0]["response_length/clip_ratio"] == 1.0
    assert masked[0]["critic/advantages/max"] == plain[0]["critic/advantages/max"] > 0
    assert plain[0]["actor/grad_norm"] > 0.0
    assert masked[0]["actor/grad_norm"] == 0.0  # nothing left in the loss


def test_a_reward_model_mixes_with_a_rule_reward(  # type: ignore[no-untyped-def]
    make_recipe, run, rm_dir,
) -> None:
    recipe = make_recipe(run={"name": "rm"}, schedule={"total_steps": 2},
                         rewards=[{"name": "digits_match"}, _rm(rm_dir, weight=0.5)])
    rows = run(recipe)
    for row in rows:
        assert row["reward/reward_model"] != 0.0
        assert row["critic/score/mean"] == pytest.approx(
            row["reward/digits_match"] + 0.5 * row["reward/reward_model"], abs=1e-5)
        assert "timing_s/reward_model" in row


def test_a_judge_scores_through_the_rollout_engine(  # type: ignore[no-untyped-def]
    make_recipe, run,
) -> None:
    options = {"template": "{prompt}{response}=", "pattern": r"\d", "scale": 9.0,
               "max_new_tokens": 3}
    rows = run(make_recipe(run={"name": "judge"}, schedule={"total_steps": 1},
                           rewards=[{"name": "digits_match"},
                                    {"name": "llm_judge", "weight": 0.2, "options": options}]))
    row = rows[0]
    assert 0.0 <= row["reward/llm_judge"] <= 1.0
    assert row["critic/score/mean"] == pytest.approx(
        row["reward/digits_match"] + 0.2 * row["reward/llm_judge"], abs=1e-6)


STREAM = {"staleness": {"policy": "bounded", "options": {"max_staleness": 1}}}


def test_streaming_with_dynamic_sampling_keeps_only_groups_with_a_signal(  # type: ignore[no-untyped-def]
    make_recipe, run,
) -> None:
    """One rollout producer: later steps are dispatched while one trains, and each step is
    still filled with groups whose rewards differ, refilled by further draws."""
    recipe = make_recipe(
        run={"name": "stream-ds"}, schedule={"total_steps": 4},
        algorithm={"group_size": N, **STREAM,
                   "dynamic_sampling": {"enabled": True, "prompts_per_draw": 16, "max_draws": 12}},
        logging={"sinks": ["jsonl"], "progress": False, "rollout_dump_samples": PROMPTS * N},
    )
    rows = run(recipe)
    assert [r["streaming/staleness_max"] for r in rows][1:] == [1.0, 1.0, 1.0]  # it streamed
    for step, row in enumerate(rows, start=1):
        assert row["dynamic_sampling/groups_drawn"] == 16 * row["dynamic_sampling/gen_batches"]
        groups: dict[str, list[float]] = {}
        for sample in _dumps(recipe, step):
            groups.setdefault(sample["key"].split("_")[0], []).append(sample["reward"])
            assert step - 1 - sample["weight_version_min"] <= 1  # within the bound
        assert len(groups) == PROMPTS and all(len(g) == N for g in groups.values())
        assert all(max(g) > min(g) for g in groups.values())


def test_streaming_scores_with_a_reward_model(  # type: ignore[no-untyped-def]
    make_recipe, run, rm_dir,
) -> None:
    """Samples dispatched ahead are scored by the reward workers when their step collects
    them (their prompts' ground truth is kept until then)."""
    recipe = make_recipe(run={"name": "stream-rm"}, schedule={"total_steps": 3},
                         algorithm=STREAM,
                         rewards=[{"name": "digits_match"}, _rm(rm_dir, weight=0.5)])
    rows = run(recipe)
    assert max(r["streaming/staleness_max"] for r in rows) == 1.0  # it streamed
    for row in rows:
        assert row["reward/reward_model"] != 0.0
        assert row["critic/score/mean"] == pytest.approx(
            row["reward/digits_match"] + 0.5 * row["reward/reward_model"], abs=1e-5)
