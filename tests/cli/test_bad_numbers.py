"""Numbers that would train on NaN or allocate for minutes, and models that cannot hold what
the recipe asks, are refused before anything starts: exit 2, the key path, nothing written
(issue 30)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlctl.config.reward_checks import MAX_DRAW_FACTOR, MAX_SCORE_SCALE

RECIPE = """
[run]
name = "n"
output_dir = "{out}"
device = "cpu"
[model]
path = "tiny"
dtype = "float32"
[data]
task = "count_digits"
[algorithm]
prompts_per_step = 4
group_size = 2
[rollout]
max_new_tokens = 3
[[rewards]]
name = "digits_match"
[engines.train]
ranks = 1
micro_batch_size = 4
[data_plane]
backend = "memory"
[resources]
mode = "local"
[schedule]
total_steps = 1
[logging]
sinks = ["jsonl"]
progress = false
"""


@pytest.fixture
def recipe(tmp_path: Path):  # type: ignore[no-untyped-def]
    out = tmp_path / "runs"
    path = tmp_path / "n.toml"
    path.write_text(RECIPE.format(out=out))
    return str(path), out


def refused(result, path: str, *words: str) -> None:  # type: ignore[no-untyped-def]
    err = result.stderr
    assert "Traceback" not in err and f"\n  {path}: " in err, err
    for word in words:
        assert word in err, err
    assert "fix: " in err


# -s overrides -> (key path, words); refused by `config validate` (and so by `train`)
VALIDATE_CASES = {
    "overlong_penalty": (["algorithm.overlong.buffer_len=2",
                          "algorithm.overlong.penalty_factor=1e308"],
                         "algorithm.overlong.penalty_factor", "leaves float32"),
    "reward_weight": (["rewards.0.weight=1e308"], "rewards[0].weight", "trains on NaN"),
    "weights_add_up": ([("rewards=[{name='digits_match', weight=-6e5}, {name='exact_match', "
                        "weight=6e5}]")], "rewards[0].weight", "scale 1.2e+06"),
    "prompts_per_draw": (["algorithm.dynamic_sampling.enabled=true",
                          "algorithm.dynamic_sampling.prompts_per_draw=100000000000000000000"],
                         "algorithm.dynamic_sampling.prompts_per_draw",
                         f"more than {MAX_DRAW_FACTOR} steps' worth"),
}


@pytest.mark.parametrize("case", sorted(VALIDATE_CASES))
def test_config_validate_refuses_numbers_that_overflow_or_never_end(rlctl, recipe, case):  # type: ignore[no-untyped-def]
    path, out = recipe
    overrides, key, words = VALIDATE_CASES[case]
    args = [a for o in overrides for a in ("-s", o)]
    refused(rlctl("config", "validate", path, *args, code=2), key, words)
    refused(rlctl("train", path, *args, code=2), key, words)
    assert not out.exists()


def test_weights_at_the_bound_pass(rlctl, recipe):  # type: ignore[no-untyped-def]
    path, _ = recipe
    rlctl("config", "validate", path, "-s", f"rewards.0.weight={MAX_SCORE_SCALE}")
    rlctl("config", "validate", path, "-s", "algorithm.dynamic_sampling.enabled=true", "-s",
          f"algorithm.dynamic_sampling.prompts_per_draw={MAX_DRAW_FACTOR * 4}")


def test_train_refuses_more_new_tokens_than_the_model_has_positions(rlctl, recipe):  # type: ignore[no-untyped-def]
    path, out = recipe
    result = rlctl("train", path, "-s", "rollout.max_new_tokens=100000", code=2)
    refused(result, "rollout.max_new_tokens", "100000 new tokens leave no room for a prompt in "
            "the model's 512 positions (model.tiny.max_position_embeddings)")
    assert "raise model.tiny.max_position_embeddings" in result.stderr
    assert not out.exists()


def test_train_refuses_a_model_directorys_positions_too(rlctl, recipe, tmp_path):  # type: ignore[no-untyped-def]
    from rlctl.testing.chat_model import write_chat_model

    model = write_chat_model(tmp_path / "chat")
    path, out = recipe
    result = rlctl("train", path, "-s", f'model.path="{model}"', "-s",
                   "rollout.max_new_tokens=100000", code=2)
    refused(result, "rollout.max_new_tokens", "max_position_embeddings in", "config.json")
    assert not out.exists()


def test_train_refuses_a_reward_model_path_that_is_not_there(rlctl, recipe, tmp_path):  # type: ignore[no-untyped-def]
    path, out = recipe
    missing = tmp_path / "no-rm"
    rm = f"rewards=[{{name='digits_match'}}, {{name='reward_model', options={{path='{missing}'}}}}]"
    assert rlctl("config", "validate", path, "-s", rm).stdout.startswith("ok: ")  # another box
    result = rlctl("train", path, "-s", rm, code=2)
    refused(result, "rewards[1].options.path", f'"{missing}" is not a local directory')
    assert "Ray" not in result.stderr
    assert not out.exists()
