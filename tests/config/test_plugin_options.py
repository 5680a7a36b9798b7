"""Each options table is validated by the option model its plugin registered."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from config_helpers import BASE

from rlctl.config.problems import ConfigProblem

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
        ("[algorithm.loss]\npolicy_loss = 'clip_cov'\n"
         "[algorithm.loss.options]\nclip_cov_ratio = 'x'",
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
