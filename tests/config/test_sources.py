"""Reading sources: -s literals, RLCTL_* variables, recipe files and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlctl.config.sources import env_layers, parse_override, read_recipe_file


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("algorithm.group_size=4", {"algorithm": {"group_size": 4}}),
        ("algorithm.optim.lr=1e-6", {"algorithm": {"optim": {"lr": 1e-6}}}),
        ("critic.enabled=true", {"critic": {"enabled": True}}),
        ("algorithm.kl.in=loss", {"algorithm": {"kl": {"in": "loss"}}}),  # bare word
        ("model.path=Qwen/Qwen3-0.6B", {"model": {"path": "Qwen/Qwen3-0.6B"}}),
        ('run.name="x y"', {"run": {"name": "x y"}}),
        ("logging.sinks=['console']", {"logging": {"sinks": ["console"]}}),
        ("data.task_options={max_digits = 3}", {"data": {"task_options": {"max_digits": 3}}}),
        ('logging.sink_options."my.sink".x=1',
         {"logging": {"sink_options": {"my.sink": {"x": 1}}}}),
        ("run.name=", {"run": {"name": ""}}),
        ("run.name=1\nrun.seed=2", {"run": {"name": "1\nrun.seed=2"}}),  # no smuggled keys
    ],
)
def test_override_values_are_toml_literals_or_strings(text: str, expected: dict) -> None:
    layer, problems = parse_override(text)
    assert problems == []
    assert layer is not None and layer.data == expected
    assert layer.label == f"-s {text}"


@pytest.mark.parametrize("text", ["algorithm.group_size", "=3", "a..b=1", "a b=1"])
def test_malformed_overrides_are_problems(text: str) -> None:
    layer, problems = parse_override(text)
    assert layer is None
    assert len(problems) == 1 and problems[0].source == "-s"
    assert text in problems[0].message


def test_env_variables_nest_on_double_underscore_and_skip_rlctl_settings() -> None:
    env = {
        "RLCTL_ALGORITHM__KL__COEF": "0.01",
        "RLCTL_ALGORITHM__KL__IN": "loss",
        "RLCTL_PLUGINS": "none",  # a setting of rlctl itself, not a recipe key
        "RLCTL_ALGORTHM__LR": "1",  # a typo: kept, so that it is reported
        "RLCTL_REWARDS": '[{name = "gsm8k"}]',
        "HOME": "/root",
    }
    layers, problems = env_layers(env)
    assert problems == []
    assert [layer.label for layer in layers] == [
        "env RLCTL_ALGORITHM__KL__COEF",
        "env RLCTL_ALGORITHM__KL__IN",
        "env RLCTL_ALGORTHM__LR",
        "env RLCTL_REWARDS",
    ]
    assert [layer.data for layer in layers] == [
        {"algorithm": {"kl": {"coef": 0.01}}},
        {"algorithm": {"kl": {"in": "loss"}}},
        {"algorthm": {"lr": 1}},
        {"rewards": [{"name": "gsm8k"}]},
    ]


def test_missing_recipe_file_is_an_error(tmp_path: Path) -> None:
    layer, problems = read_recipe_file(tmp_path / "nope.toml")
    assert layer is None
    assert problems[0].message == "recipe file not found"
    assert problems[0].source == str(tmp_path / "nope.toml")


def test_toml_syntax_error_gives_file_line_column_and_key_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[run]\nname = "a"\n\n[algorithm]\ngroup_size = = 4\n')
    layer, problems = read_recipe_file(path)
    assert layer is None
    (problem,) = problems
    assert problem.source == f"{path}:5:14"
    assert problem.path == "algorithm.group_size"
    assert "line 5, column 14" in problem.message


def test_syntax_error_inside_an_array_of_tables_names_the_element(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[rewards]]\nname = "a"\n[[rewards]]\nname = b c\n')
    _, (problem,) = read_recipe_file(path)
    assert problem.path == "rewards[1].name"
    assert problem.source == f"{path}:4:8"
