"""Every problem is reported at once, with a key path, what is wrong and a fix."""

from __future__ import annotations

from collections.abc import Callable

from rlctl.config.problems import ConfigProblem, format_problems
from tests.config.config_helpers import BASE

Problems = Callable[..., list[ConfigProblem]]


def by_path(problems: list[ConfigProblem]) -> dict[str, ConfigProblem]:
    return {p.path: p for p in problems}


def test_unknown_keys_suggest_the_closest_key_at_every_level(problems: Problems) -> None:
    found = by_path(problems(BASE + """
[algoritm]
x = 1
[algorithm]
group_sise = 4
[algorithm.kl]
coeff = 0.1
[[rewards]]
name = "digits_match"
wieght = 2
"""))
    assert found["algoritm"].fix == 'did you mean "algorithm"?'
    assert found["algorithm.group_sise"].fix == 'did you mean "group_size"?'
    assert found["algorithm.group_sise"].message == 'unknown key "group_sise" in [algorithm]'
    assert found["algorithm.kl.coeff"].fix == 'did you mean "coef"?'
    assert found["rewards[0].wieght"].fix == 'did you mean "weight"?'
    assert len(found) == 4


def test_unknown_key_without_a_close_match_lists_the_valid_keys(problems: Problems) -> None:
    (p,) = problems(BASE + "[algorithm.kl]\nzzz = 1\n")
    assert p.fix == ("remove it; valid keys: coef, controller, estimator, horizon, in, target")


def test_wrong_types_and_ranges_say_what_to_write(problems: Problems) -> None:
    found = by_path(problems(BASE + """
[algorithm]
prompts_per_step = "many"
group_size = 0
[algorithm.kl]
in = "los"
[rollout]
top_p = 1.5
"""))
    assert found["algorithm.prompts_per_step"].message == 'expected a whole number, got "many"'
    assert found["algorithm.prompts_per_step"].fix == (
        "write a whole number; the default is prompts_per_step = 64")
    assert found["algorithm.group_size"].message == "0 is out of range (must be > 0)"
    assert found["algorithm.kl.in"].fix.startswith('did you mean "loss"?')
    assert found["rollout.top_p"].fix == "use a value <= 1.0; the default is top_p = 1.0"


def test_problems_of_every_stage_come_together(problems: Problems) -> None:
    found = by_path(problems(BASE + """
[algorithm]
estimator = "grpoo"
minibatches = 3
[algorithm.loss]
clip_hi = 0.3
[engines.train.options]
mixed_precision = "fp8"
""", overrides=["schedule.total_steps=-1"], env={"RLCTL_ROLLOUT__TOP_K": "x"}))
    assert set(found) == {
        "algorithm.estimator",  # registry name
        "algorithm.minibatches",  # cross-field
        "algorithm.loss.clip_hi",  # unknown key
        "engines.train.options.mixed_precision",  # plugin option model
        "schedule.total_steps",  # range, from -s
        "rollout.top_k",  # type, from env
    }
    assert found["schedule.total_steps"].source == "-s schedule.total_steps=-1"
    assert found["rollout.top_k"].source == "env RLCTL_ROLLOUT__TOP_K"
    assert found["algorithm.estimator"].fix.startswith('did you mean "grpo"?')


def test_missing_required_key_in_a_list_of_tables(problems: Problems) -> None:
    (p,) = problems(BASE + "[[rewards]]\nweight = 1.0\n")
    assert (p.path, p.message) == ("rewards[0].name", 'required key "name" is missing')


def test_section_given_as_a_value(problems: Problems) -> None:
    (p,) = problems("algorithm = 3\n" + BASE)
    assert p.path == "algorithm" and p.message == "expected a table, got 3"


def test_missing_files_are_all_reported(problems: Problems, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from rlctl.config.pipeline import load_recipe
    from rlctl.config.problems import ConfigError

    with pytest.raises(ConfigError) as err:
        load_recipe([tmp_path / "a.toml", tmp_path / "b.toml"], env={})
    assert [p.source for p in err.value.problems] == [
        str(tmp_path / "a.toml"), str(tmp_path / "b.toml")]


def test_report_format() -> None:
    text = format_problems([
        ConfigProblem("algorithm.group_size", "0 is out of range (must be > 0)",
                      "use a value > 0", "-s algorithm.group_size=0"),
        ConfigProblem("", "recipe file not found", "check the path", "x.toml"),
    ])
    assert text == (
        "error: the recipe has 2 problems:\n"
        "  algorithm.group_size: 0 is out of range (must be > 0)"
        "  [from -s algorithm.group_size=0]\n"
        "      fix: use a value > 0\n"
        "  x.toml: recipe file not found\n"
        "      fix: check the path"
    )


def test_an_empty_path_is_an_error_not_the_current_directory(problems: Problems) -> None:
    (p,) = problems(BASE + '[run]\noutput_dir = " "\n')
    assert p.path == "run.output_dir"
    assert p.message.startswith("an empty path is not a path")
    assert p.fix.endswith('the default is output_dir = "runs"')
