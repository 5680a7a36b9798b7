"""Finished samples survive a checkpoint: saved from one data plane, loaded into a fresh one."""

from __future__ import annotations

import json

import torch
from tensordict import TensorDict

from rlctl.dataplane import jagged
from rlctl.dataplane.memory import MemoryDataPlane
from rlctl.trainer.worker.sample_store import (
    SAMPLES_JSON,
    SAMPLES_TENSORS,
    load_samples,
    save_samples,
    stored_fields,
)


def _filled() -> MemoryDataPlane:
    plane = MemoryDataPlane()
    ok = ["u1_0_0", "u1_1_0"]
    fields = TensorDict({
        "response_ids": jagged.from_list([torch.tensor([5, 6, 7]), torch.tensor([8])]),
        "rollout_log_probs": jagged.from_list([torch.tensor([-0.5, -1.0, -2.0]),
                                               torch.tensor([-0.25])]),
        "score": torch.tensor([1.0, 0.0]),
    }, batch_size=[2])
    fields["data_source"] = ["a", "b"]
    plane.kv_batch_put(ok, "train", fields, [{"uid": "u1", "status": "success", "seq_len": 3},
                                            {"uid": "u1", "status": "success", "seq_len": 1}])
    # a later put with one more field on one sample only, and a failure: tags only
    plane.kv_batch_put(["u2_0_0"], "train", TensorDict({
        "response_ids": jagged.from_list([torch.tensor([9, 9])]),
        "score": torch.tensor([0.5]), "reward/extra": torch.tensor([2.0])}, batch_size=[1]),
        [{"uid": "u2", "status": "success", "seq_len": 2}])
    plane.kv_batch_put(["u2_1_0"], "train", None,
                       [{"uid": "u2", "status": "failure", "error": "boom", "seq_len": 0}])
    return plane


def test_samples_round_trip_with_their_tags_and_fields(tmp_path):
    src = _filled()
    listing = src.kv_list("train")
    keys = list(listing)
    names = ["response_ids", "rollout_log_probs", "score", "reward/extra", "data_source"]
    assert save_samples(src, "train", keys, [listing[k] for k in keys], names, tmp_path) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == [SAMPLES_JSON, SAMPLES_TENSORS]
    assert stored_fields(tmp_path) == sorted(names)
    assert json.loads((tmp_path / SAMPLES_JSON).read_text())["fields"]["reward/extra"]["rows"] == [
        2
    ]

    dst = MemoryDataPlane()
    assert load_samples(dst, tmp_path) == keys
    assert dst.kv_list("train") == listing
    both = ["u1_0_0", "u1_1_0"]
    for name in ("response_ids", "rollout_log_probs"):
        a, b = src.kv_batch_get(both, "train", [name]), dst.kv_batch_get(both, "train", [name])
        assert all(torch.equal(x, y) for x, y in zip(a[name].unbind(), b[name].unbind(),
                                                       strict=True))
    assert torch.equal(dst.kv_batch_get(keys[:3], "train", ["score"])["score"],
                       torch.tensor([1.0, 0.0, 0.5]))
    assert dst.kv_batch_get(["u2_0_0"], "train", ["reward/extra"])["reward/extra"].tolist() == [2.0]
    assert list(dst.kv_batch_get(both, "train", ["data_source"])["data_source"]) == ["a", "b"]
