"""ModelBatch layout: left-padded prompts, right-padded responses, aligned slicing."""

from __future__ import annotations

import pytest
import torch

from rlctl.engines.train.batch import ModelBatch


def _batch() -> ModelBatch:
    return ModelBatch.from_samples([[5, 6, 7], [8]], [[9], [10, 11, 12]], pad_id=0)


def test_layout():
    b = _batch()
    assert b.input_ids.tolist() == [[5, 6, 7, 9, 0, 0], [0, 0, 8, 10, 11, 12]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1]]
    assert b.position_ids.tolist() == [[0, 1, 2, 3, 3, 3], [0, 0, 0, 1, 2, 3]]
    assert b.responses.tolist() == [[9, 0, 0], [10, 11, 12]]
    assert b.response_mask.tolist() == [[1, 0, 0], [1, 1, 1]]
    assert (b.prompt_width, b.response_width, len(b)) == (3, 3, 2)


def test_slice_split_and_trim_keep_alignment():
    b = ModelBatch.from_samples([[5, 6, 7], [8], [9, 9]], [[1], [2, 3], []], pad_id=0)
    parts = b.split(2)
    assert [len(p) for p in parts] == [2, 1]
    assert parts[1].responses.tolist() == [[0, 0]] and parts[1].response_mask.sum() == 0
    picked = b.slice([1])
    assert picked.input_ids.tolist() == [[0, 0, 8, 2, 3]]
    trimmed = picked.trim_prompt_padding()
    assert trimmed.input_ids.tolist() == [[8, 2, 3]]
    assert trimmed.responses.tolist() == [[2, 3]]
    assert trimmed.prompt_width == 1


def test_cat_round_trip():
    b = _batch()
    both = ModelBatch.cat([b.slice([0]), b.slice([1])], pad_id=0)
    for name in ("input_ids", "attention_mask", "position_ids", "responses", "response_mask"):
        assert torch.equal(getattr(both, name), getattr(b, name))


@pytest.mark.parametrize(
    ("prompts", "responses", "message"),
    [([[1]], [], "1 prompts but 0 responses"), ([], [], "zero samples"), ([[]], [[1]], "empty")],
)
def test_bad_inputs_say_what_is_wrong(prompts, responses, message):
    with pytest.raises(ValueError, match=message):
        ModelBatch.from_samples(prompts, responses, pad_id=0)
