"""``[algorithm.staleness] partial_rollout``: typed, ``finish`` by default, and ``resume`` refused
(naming the key, before any worker starts) where no request can be in flight at a weight
update or the engine cannot abort and resume them."""

from __future__ import annotations

import pytest

from tests.config.config_helpers import BASE

KEY = "algorithm.staleness.partial_rollout"
STREAM = ["algorithm.staleness.policy=bounded", "algorithm.staleness.options.max_staleness=1"]
RESUME = [f'{KEY}="resume"']


def test_finish_is_the_default_and_resume_loads_on_a_server_engine_when_streaming(load) -> None:  # type: ignore[no-untyped-def]
    assert load(BASE).recipe.algorithm.staleness.partial_rollout == "finish"
    for engine in ("vllm", "sglang"):
        loaded = load(BASE, overrides=[*STREAM, *RESUME, f"engines.rollout.backend={engine}"])
        assert loaded.recipe.algorithm.staleness.partial_rollout == "resume"


@pytest.mark.parametrize(("overrides", "words", "fix"), [
    # sync: nothing is in flight when the weights change
    (["engines.rollout.backend=vllm"], "trains in lock step", 'policy = "bounded"'),
    # --local runs a submitted generate to its end
    ([*STREAM, "engines.rollout.backend=vllm", 'resources.mode="local"'],
     'resources.mode = "local"', "Ray mode"),
    # hf generates in-process: nothing to abort
    ([*STREAM], "'hf' cannot", "['sglang', 'vllm']"),
])
def test_resume_where_nothing_can_be_aborted_is_refused_naming_the_key(  # type: ignore[no-untyped-def]
        problems, overrides, words, fix) -> None:
    (p,) = problems(BASE, overrides=[*overrides, *RESUME])
    assert p.path == KEY
    assert words in p.message, p.message
    assert fix in p.fix and 'partial_rollout = "finish"' in p.fix, p.fix


def test_an_unknown_value_names_the_key(problems) -> None:  # type: ignore[no-untyped-def]
    (p,) = problems(BASE, overrides=[*STREAM, f'{KEY}="abort"'])
    assert p.path == KEY
