"""DAPO's settings ([algorithm.dynamic_sampling], [algorithm.overlong]) and model rewards in a
recipe: typed, validated with the key path, and checked across fields before anything runs."""

from __future__ import annotations

from collections.abc import Callable

from rlctl.config.problems import ConfigProblem
from tests.config.config_helpers import BASE

Problems = Callable[..., list[ConfigProblem]]
DS = "algorithm.dynamic_sampling"
RM = '[[rewards]]\nname = "digits_match"\n\n[[rewards]]\nname = "reward_model"\nweight = 0.5\n'


def test_dapo_settings_load_typed(load) -> None:  # type: ignore[no-untyped-def]
    loaded = load(BASE + f"[{DS}]\nenabled = true\nmetric = \"digits_match\"\n"
                  "prompts_per_draw = 96\nmax_draws = 4\n"
                  "[algorithm.overlong]\nbuffer_len = 64\npenalty_factor = 0.5\nfilter = true\n",
                  overrides=["rollout.max_new_tokens=128"])
    alg = loaded.recipe.algorithm
    assert (alg.dynamic_sampling.enabled, alg.dynamic_sampling.prompts_per_draw,
            alg.dynamic_sampling.max_draws) == (True, 96, 4)
    assert (alg.overlong.buffer_len, alg.overlong.penalty_factor, alg.overlong.filter) == (
        64, 0.5, True)
    # off by default: a recipe without the tables runs exactly as before
    plain = load(BASE).recipe.algorithm
    assert not plain.dynamic_sampling.enabled and plain.overlong.buffer_len == 0
    assert not plain.overlong.filter


def test_wrong_types_and_ranges_name_the_key(problems: Problems) -> None:
    found = problems(BASE, overrides=[f"{DS}.max_draws=0", "algorithm.overlong.buffer_len=-1",
                                      f"{DS}.enabled=maybe"])
    assert sorted(p.path for p in found) == [
        "algorithm.dynamic_sampling.enabled", "algorithm.dynamic_sampling.max_draws",
        "algorithm.overlong.buffer_len"]


def test_metric_must_name_score_a_reward_or_a_component(  # type: ignore[no-untyped-def]
    problems: Problems, load,
) -> None:
    (p,) = problems(BASE, overrides=[f"{DS}.enabled=true", f"{DS}.metric=digit_match"])
    assert p.path == f"{DS}.metric"
    assert 'did you mean "digits_match"?' in p.fix  # the task's default reward
    (p,) = problems(BASE, overrides=[f"{DS}.enabled=true", f"{DS}.metric=acc/exact"])
    assert p.path == f"{DS}.metric"
    for metric in ("score", "digits_match", "digits_match/exact"):
        load(BASE, overrides=[f"{DS}.enabled=true", f"{DS}.metric={metric}"])
    # the overlong penalty is a metric of its own once it is on
    load(BASE, overrides=[f"{DS}.enabled=true", f"{DS}.metric=overlong",
                          "algorithm.overlong.buffer_len=2"])


def test_dynamic_sampling_needs_groups(problems: Problems) -> None:
    (p,) = problems(BASE, overrides=[f"{DS}.enabled=true", "algorithm.group_size=1",
                                     "algorithm.estimator=reinforce_plus_plus"])
    assert p.path == f"{DS}.enabled" and "nothing to filter" in p.message


def test_settings_that_would_do_nothing_are_refused(problems: Problems) -> None:
    (p,) = problems(BASE, overrides=[f"{DS}.prompts_per_draw=96"])
    assert p.path == f"{DS}.prompts_per_draw" and "dynamic sampling is off" in p.message
    (p,) = problems(BASE, overrides=["algorithm.overlong.max_tokens=200"])
    assert p.path == "algorithm.overlong.max_tokens"


def test_overlong_buffer_must_fit_the_response(  # type: ignore[no-untyped-def]
    problems: Problems, load,
) -> None:
    (p,) = problems(BASE, overrides=["algorithm.overlong.buffer_len=300"])  # max_new_tokens 256
    assert p.path == "algorithm.overlong.buffer_len"
    assert "256" in p.message and "buffer_len <= 256" in p.fix
    load(BASE, overrides=["algorithm.overlong.buffer_len=300", "algorithm.overlong.max_tokens=512"])


def test_reward_model_options_are_validated(  # type: ignore[no-untyped-def]
    problems: Problems, load,
) -> None:
    (p,) = problems(BASE + RM)
    assert p.path == "rewards[1].options.path"
    found = problems(BASE + RM + 'options = { path = "/rm", micro_batch_size = 0, dtyp = "x" }\n')
    assert sorted(p.path for p in found) == ["rewards[1].options.dtyp",
                                             "rewards[1].options.micro_batch_size"]
    load(BASE + RM + 'options = { path = "/rm" }\n')


def test_a_model_reward_listed_twice_is_refused(problems: Problems) -> None:
    twice = BASE + RM + 'options = { path = "/a" }\n' + (
        '[[rewards]]\nname = "reward_model"\noptions = { path = "/b" }\n')
    (p,) = problems(twice)
    assert p.path == "rewards[2].name" and "listed twice" in p.message


def test_judge_template_and_pattern_are_checked(  # type: ignore[no-untyped-def]
    problems: Problems, load,
) -> None:
    judge = BASE + '[[rewards]]\nname = "llm_judge"\n'
    found = problems(judge + 'options = { template = "Rate {answr}", pattern = "(a)(b)" }\n')
    assert sorted(p.path for p in found) == ["rewards[0].options.pattern",
                                             "rewards[0].options.template"]
    (p,) = problems(judge + 'options = { template = "no response here" }\n')
    assert "{response}" in p.message
    load(judge + 'options = { template = "{prompt} -> {response}?", scale = 1.0 }\n')
