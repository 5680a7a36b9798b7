"""The controller-traffic meter has one definition in both modes: a reference (Ray ObjectRef
or --local LocalRef) counts as a reference, every other payload as its pickled bytes."""

from __future__ import annotations

import pickle

import pytest
import ray
import torch

from rlctl.protocol.refs import LocalRef, is_reference, resolve
from rlctl.trainer.controller.worker_group import TrafficMeter


def metered(payload) -> int:  # type: ignore[no-untyped-def]
    meter = TrafficMeter()
    meter.count("update_weights", payload, outgoing=True)
    return meter.total


def test_an_object_ref_and_a_local_ref_count_the_same_whatever_they_point_to() -> None:
    weights = {"w": torch.randn(256, 256)}  # 256 KiB behind the reference
    by_ray = metered({"weights": [ray.ObjectRef.from_random()], "version": 3})
    by_local = metered({"weights": [LocalRef(weights)], "version": 3})
    assert by_ray == by_local < 100
    assert metered({"weights": [LocalRef({"w": torch.randn(4)})], "version": 3}) == by_local


def test_a_payload_sent_by_value_counts_its_bytes() -> None:
    weights = {"w": torch.randn(256, 256)}
    assert metered({"weights": weights, "version": 3}) > 256 * 256 * 4
    tags = [{"uid": f"{i:032x}", "seq_len": 12} for i in range(64)]
    assert metered(tags) == len(pickle.dumps(tags, protocol=pickle.HIGHEST_PROTOCOL))


def test_a_local_ref_resolves_in_process_and_refuses_to_be_pickled() -> None:
    weights = {"w": torch.randn(3)}
    ref = LocalRef(weights)
    assert is_reference(ref) and is_reference(ray.ObjectRef.from_random())
    assert not is_reference(weights) and not is_reference([ref])
    assert resolve(ref) is weights
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(ref)
