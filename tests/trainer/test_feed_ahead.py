"""Prompts fed ahead (while the ranks train) are the prompts the next step would draw.

A batch fed ahead is not consumed: a checkpoint taken meanwhile saves the state before it,
and a request that differs takes it back (keys cleared, source rewound).
"""

from __future__ import annotations

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.dataplane.memory import MemoryDataPlane
from rlctl.models.tiny import build_tiny_tokenizer
from rlctl.trainer.controller.prompts import PromptFeeder

RECIPE = Recipe.model_validate({"model": {"path": "tiny"}, "data": {"task": "count_digits"},
                                "data_plane": {"backend": "memory"},
                                "resources": {"mode": "local"}})
PART = "prompts-train"


def _feeder(plane):
    options = validate_recipe(RECIPE).options_for("data.task_options")
    return PromptFeeder(RECIPE, build_tiny_tokenizer(), plane, task_options=options)


def _ids(plane, meta):
    td = plane.kv_batch_get(list(meta.keys), meta.partition_id, ["prompt_ids"])
    return [row.tolist() for row in td["prompt_ids"].unbind()]


def test_the_batch_fed_ahead_is_the_next_batch():
    plain, ahead = MemoryDataPlane(), MemoryDataPlane()
    a, b = _feeder(plain), _feeder(ahead)
    expected = [_ids(plain, a.next_batch(4, partition="train", global_step=s, n=2))
                for s in (1, 2)]
    first = b.next_batch(4, partition="train", global_step=1, n=2)
    b.prefetch(4, partition="train", global_step=2, n=2)
    fed = set(ahead.kv_list(PART))  # already in the data plane, before it is asked for
    assert fed - set(first.keys)
    second = b.next_batch(4, partition="train", global_step=2, n=2)
    assert set(second.keys) == fed - set(first.keys)
    assert [_ids(ahead, first), _ids(ahead, second)] == expected
    assert [t["global_step"] for t in second.tags] == [2] * 4


def test_a_checkpoint_meanwhile_saves_the_state_before_the_batch_fed_ahead():
    plane = MemoryDataPlane()
    feeder = _feeder(plane)
    feeder.next_batch(4, partition="train", global_step=1, n=2)
    saved = feeder.state_dict()
    feeder.prefetch(4, partition="train", global_step=2, n=2)
    assert feeder.state_dict() == saved  # the batch fed ahead is not consumed
    resumed = _feeder(MemoryDataPlane())
    resumed.load_state_dict(feeder.state_dict())
    again = resumed.next_batch(4, partition="train", global_step=2, n=2)
    fed = feeder.next_batch(4, partition="train", global_step=2, n=2)
    assert _ids(resumed.plane, again) == _ids(plane, fed)  # the resumed run draws the same


def test_another_request_takes_the_batch_back():
    plane, plain = MemoryDataPlane(), MemoryDataPlane()
    feeder, reference = _feeder(plane), _feeder(plain)
    feeder.prefetch(4, partition="train", global_step=1, n=2)
    ahead_keys = set(plane.kv_list(PART))
    got = feeder.next_batch(6, partition="train", global_step=1, n=2)  # not what was fed
    assert not ahead_keys & set(plane.kv_list(PART))  # its prompts were cleared
    assert set(plane.kv_list(PART)) == set(got.keys)
    want = reference.next_batch(6, partition="train", global_step=1, n=2)
    assert _ids(plane, got) == _ids(plain, want)  # drawn from where the source was
