"""n per prompt: a task or the choose_group_size hook picks how many sessions each prompt gets."""

from __future__ import annotations

import types

import pytest

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.dataplane.memory import MemoryDataPlane
from rlctl.dataplane.replay_buffer import ReplayBuffer
from rlctl.engines.rollout.contract import SamplingParams
from rlctl.hookspecs import hookimpl
from rlctl.models.tiny import build_tiny_tokenizer
from rlctl.protocol.kv import parse_key
from rlctl.registry import build_registry, set_registry
from rlctl.tasks.prompt import Prompt
from rlctl.trainer.controller.prompts import PromptFeeder

RECIPE = Recipe.model_validate(
    {
        "model": {"path": "tiny", "dtype": "float32"},
        "data": {"task": "count_digits"},
        "algorithm": {"group_size": 4},
        "rollout": {"max_new_tokens": 2},
        "data_plane": {"backend": "memory"},
        "resources": {"mode": "local"},
    }
)


def feeder_of(plane: MemoryDataPlane) -> PromptFeeder:
    options = validate_recipe(RECIPE).options_for("data.task_options")
    return PromptFeeder(RECIPE, build_tiny_tokenizer(), plane, task_options=options)


def hard_prompts_get_more(answer):
    module = types.ModuleType("rlctl_test_group_size")

    @hookimpl
    def choose_group_size(recipe, prompt, split, default):
        return answer(prompt, default)

    module.choose_group_size = choose_group_size
    return module


@pytest.fixture
def use(request):
    def install(answer):
        set_registry(build_registry(extra=[hard_prompts_get_more(answer)]))

    yield install
    set_registry(None)


def test_the_hook_chooses_n_per_prompt_and_the_rollout_honours_it(use):
    # long prompts are "hard": twice the group size; one-digit prompts get one sample
    use(lambda p, d: 2 * d if len(p.text) > 6 else (1 if len(p.text) == 2 else None))
    from rlctl.trainer.worker.rollout_worker import RolloutWorker

    plane = MemoryDataPlane()
    feeder = feeder_of(plane)
    meta = feeder.next_batch(12, partition="train", global_step=1, n=4)
    sizes = [t["n"] for t in meta.tags]
    lens = [t["prompt_len"] for t in meta.tags]  # <bos> + digits + "="
    assert sizes == [8 if n - 1 > 6 else (1 if n - 1 == 2 else 4) for n in lens]
    assert len(set(sizes)) > 1
    replay = ReplayBuffer(plane)
    replay.add("train", [(u, t["n"], 1) for u, t in zip(meta.keys, meta.tags, strict=True)])
    worker = RolloutWorker(validate_recipe(RECIPE), plane)
    worker.ready()
    worker.generate(meta, "train", 1, SamplingParams(2), 4)
    batch = replay.sample("train", 1, timeout=10)
    per_uid = {}
    for key in batch.keys:
        per_uid.setdefault(parse_key(key)[0], set()).add(parse_key(key)[1])
    assert [len(per_uid[u]) for u in meta.keys] == sizes


def test_a_prompts_own_n_is_used_when_no_hook_answers():
    set_registry(None)
    feeder = feeder_of(MemoryDataPlane())
    prompt = Prompt(text="12=", ground_truth={"ground_truth": "2"}, data_source="t", n=6)
    assert feeder.group_size(prompt, 4) == 6
    assert feeder.group_size(Prompt(text="1=", ground_truth={}, data_source="t"), 4) == 4
    with pytest.raises(ValueError, match="positive int"):
        Prompt(text="1=", ground_truth={}, data_source="t", n=0)


def test_a_bad_answer_from_the_hook_is_a_clear_error(use):
    use(lambda p, d: 0)
    feeder = feeder_of(MemoryDataPlane())
    with pytest.raises(ValueError, match="choose_group_size of plugin rlctl_test_group_size "
                       "answered 0 for a prompt of 'count_digits'"):
        feeder.next_batch(2, partition="train", global_step=1, n=4)


def test_a_hook_that_raises_stops_the_run_with_its_name(use):
    use(lambda p, d: 1 // 0)
    feeder = feeder_of(MemoryDataPlane())
    with pytest.raises(RuntimeError, match="plugin rlctl_test_group_size: choose_group_size "
                       "raised ZeroDivisionError") as info:
        feeder.next_batch(2, partition="train", global_step=1, n=4)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
