"""Each options table is validated by the option model its plugin registered."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import BaseModel

from rlctl.config.pipeline import load_recipe
from rlctl.config.problems import ConfigError, ConfigProblem
from rlctl.hookspecs import hookimpl
from rlctl.registry import build_registry
from tests.config.config_helpers import BASE

Problems = Callable[..., list[ConfigProblem]]


def test_valid_options_are_returned_as_models(load) -> None:  # type: ignore[no-untyped-def]
    loaded = load(BASE + """
[engines.train.options]
mixed_precision = "bf16"
[data.task_options]
max_digits = 5
[logging.sink_options.jsonl]
flush_every = 10
""")
    assert loaded.options_for("engines.train.options").mixed_precision == "bf16"
    assert loaded.options_for("data.task_options").max_digits == 5
    assert loaded.options_for("logging.sink_options.jsonl").flush_every == 10
    assert loaded.options_for("engines.rollout.options") is not None  # defaults, validated


@pytest.mark.parametrize(
    ("table", "path"),
    [
        ("[engines.train.options]\nmixed_precison = 'bf16'",
         "engines.train.options.mixed_precison"),
        ("[engines.rollout.options]\ngeneration_batch_size = -1",
         "engines.rollout.options.generation_batch_size"),
        ("[data.task_options]\nmax_digit = 3", "data.task_options.max_digit"),
        (("[algorithm.loss]\npolicy_loss = 'clip_cov'\n"
          "[algorithm.loss.options]\nclip_cov_ratio = 'x'"),
         "algorithm.loss.options.clip_cov_ratio"),
        ("[algorithm]\nestimator = 'gpg'\n[algorithm.estimator_options]\nfnorm = 1",
         "algorithm.estimator_options.fnorm"),
        ("[[rewards]]\nname = 'gsm8k'\n[rewards.options]\nmethod = 'loose'",
         "rewards[0].options.method"),
        ("[logging.sink_options.console]\nevery = 0", "logging.sink_options.console.every"),
    ],
)
def test_bad_options_are_problems_with_their_key_path(
    problems: Problems, table: str, path: str
) -> None:
    assert [p.path for p in problems(BASE + table + "\n")] == [path]


def test_options_for_a_name_without_an_option_model(problems: Problems) -> None:
    (p,) = problems(BASE + "[algorithm.estimator_options]\nk = 2\n")
    assert p.path == "algorithm.estimator_options"
    assert p.message == 'advantage estimator "grpo" takes no options, got k'


def test_options_of_a_sink_that_is_not_selected(problems: Problems) -> None:
    (p,) = problems(BASE + "[logging.sink_options.tensorbord]\nflush_secs = 1\n")
    assert p.path == "logging.sink_options.tensorbord"
    assert p.fix.startswith('did you mean')


class _LaxOptions(BaseModel):
    """A third-party option model that does not inherit rlctl's OptionsModel."""

    scale: float = 1.0
    weights: list[float] = []
    nested: dict[str, float] = {}


class _LaxReward:
    @hookimpl
    def register_reward_functions(self, register) -> None:  # type: ignore[no-untyped-def]
        register("lax", "rlctl.rewards.match:digits_match", options=_LaxOptions,
                 description="third-party reward with a plain pydantic option model")


@pytest.mark.parametrize(
    ("options", "path", "shown"),
    [
        ("scale = nan", "rewards[0].options.scale", "nan"),
        ("weights = [1.0, inf]", "rewards[0].options.weights[1]", "inf"),
        ("nested = {a = -inf}", "rewards[0].options.nested.a", "-inf"),
    ],
)
def test_a_third_party_option_model_still_gets_no_nan_or_inf(
    write, options: str, path: str, shown: str
) -> None:  # type: ignore[no-untyped-def]
    registry = build_registry(external="none", extra=[_LaxReward()])
    text = BASE + f"[[rewards]]\nname = 'lax'\n[rewards.options]\n{options}\n"
    with pytest.raises(ConfigError) as err:
        load_recipe([write(text)], env={}, registry=registry)
    (p,) = err.value.problems
    assert (p.path, p.message) == (path, f"{shown} is not a finite number")
    ok = load_recipe([write(BASE + "[[rewards]]\nname = 'lax'\n[rewards.options]\nscale = 2\n")],
                     env={}, registry=registry)
    assert ok.options_for("rewards[0].options").scale == 2.0
