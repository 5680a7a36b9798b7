"""Partial-rollout bookkeeping without a server: replies into segments, the resumed request,
seeds, the in-flight gate, and the segments an output carries into its tags and metrics.

The real servers abort and resume in ``tests/engines/rollout/{vllm,sglang}/test_*_partial.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from rlctl.agents.contract import AgentOutput, partial_fields
from rlctl.agents.trajectory import Trajectory
from rlctl.engines.rollout.contract import Generation, SamplingParams, WeightSegment
from rlctl.engines.rollout.server.partial import (
    InFlight,
    PartialResponse,
    Reply,
    attempt_seed,
    resumed,
)
from rlctl.protocol.kv import KVBatchMeta
from rlctl.trainer.controller.producer import partial_metrics

PROMPT = [1, 5, 6]


def test_an_aborted_response_is_resumed_with_its_tokens_and_the_rest_of_the_budget() -> None:
    sampling = SamplingParams(max_new_tokens=10, temperature=0.7, top_p=0.9, top_k=5,
                              stop_token_ids=(3,))
    r = PartialResponse(10)
    r.add(0, Reply([7, 8, 9], [-0.1, -0.2, -0.3], "abort"))
    assert not r.done and r.aborts == 1
    ids, s = r.next_request(PROMPT, sampling)
    assert ids == [1, 5, 6, 7, 8, 9]  # prompt + tokens so far: nothing lost, nothing repeated
    assert s == SamplingParams(7, 0.7, 0.9, 5, (3,))  # only the budget changed
    r.add(1, Reply([10, 11], [-0.4, -0.5], "abort"))
    ids, s = r.next_request(PROMPT, sampling)
    assert ids == [1, 5, 6, 7, 8, 9, 10, 11] and s.max_new_tokens == 5
    r.add(2, Reply([12, 3], [-0.6, -0.7], "stop"))
    gen = r.generation()
    assert gen.token_ids == [7, 8, 9, 10, 11, 12, 3]
    assert gen.log_probs == [-0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7]  # each from its version
    assert gen.segments == (WeightSegment(0, 0, 3), WeightSegment(1, 3, 5),
                            WeightSegment(2, 5, 7))
    assert (gen.finish_reason, gen.weight_version, gen.aborts, gen.resumes) == ("stop", 0, 2, 2)


def test_a_response_never_aborted_is_a_plain_generation() -> None:
    r = PartialResponse(4)
    r.add(3, Reply([7, 8], [-1.0, -2.0], "stop"))
    assert r.generation() == Generation([7, 8], [-1.0, -2.0], "stop", 3)
    assert r.generation().weight_segments() == [WeightSegment(3, 0, 2)]


def test_segments_skip_empty_replies_and_join_one_version() -> None:
    r = PartialResponse(8)
    r.add(0, Reply([], [], "abort"))  # aborted before its first token: no span
    r.next_request(PROMPT, SamplingParams(8))
    r.add(1, Reply([4, 5], [-1.0, -1.0], "abort"))
    r.next_request(PROMPT, SamplingParams(8))
    r.add(1, Reply([6], [-1.0], "abort"))  # aborted with no weight change (another client)
    r.next_request(PROMPT, SamplingParams(8))
    r.add(2, Reply([7], [-1.0], "length"))
    gen = r.generation()
    assert gen.segments == (WeightSegment(1, 0, 3), WeightSegment(2, 3, 4))
    assert gen.weight_version == 1  # the oldest weights that generated a token
    assert (gen.aborts, gen.resumes) == (3, 3)


def test_an_abort_that_comes_with_the_last_token_completes_the_response() -> None:
    r = PartialResponse(2)
    r.add(0, Reply([4, 5], [-1.0, -1.0], "abort"))
    assert r.done and r.generation().finish_reason == "length" and r.resumes == 0
    with pytest.raises(ValueError, match="nothing left to resume"):
        resumed(PROMPT, [4, 5], SamplingParams(2))


def test_a_reply_past_the_budget_or_with_missing_log_probs_is_refused() -> None:
    r = PartialResponse(2)
    with pytest.raises(ValueError, match="more than max_new_tokens = 2"):
        r.add(0, Reply([1, 2, 3], [0.0, 0.0, 0.0], "length"))
    with pytest.raises(ValueError, match="2 tokens but 1 log-probs"):
        r.add(0, Reply([1, 2], [0.0], "stop"))
    with pytest.raises(RuntimeError, match="not finished"):
        r.generation()


def test_each_resumed_request_has_a_seed_of_its_own() -> None:
    seeds = [attempt_seed(12345, a) for a in range(5)]
    assert seeds[0] == 12345 and len(set(seeds)) == 5
    assert all(0 <= s < 2**63 for s in seeds)
    assert attempt_seed(2**63 - 1, 3) == attempt_seed(2**63 - 1, 3)  # deterministic


def test_the_gate_holds_requests_while_weights_change_and_drained_is_bounded() -> None:
    async def run() -> None:
        flight = InFlight()
        flight.enter("s0")
        flight.enter("s1")
        assert flight.count == 2 and not await flight.drained(0.01)  # bounded: False, no hang
        flight.close()
        waiting = asyncio.ensure_future(flight.wait_open())
        await asyncio.sleep(0.01)
        assert not waiting.done()  # a new request waits for the new weights
        flight.leave("s0")
        flight.leave("s1")
        assert await flight.drained(0.01) and flight.by_server == {}
        flight.open()
        await asyncio.wait_for(waiting, 1.0)

    asyncio.run(run())


def _resumed_generation() -> Generation:
    r = PartialResponse(6)
    r.add(4, Reply([7, 8], [-1.0, -1.0], "abort"))
    r.next_request(PROMPT, SamplingParams(6))
    r.add(5, Reply([9], [-1.0], "stop"))
    return r.generation()


def test_an_output_carries_its_segments_and_spans_their_versions() -> None:
    gen = _resumed_generation()
    out = AgentOutput(PROMPT, gen.token_ids, gen.log_probs, gen.finish_reason,
                      gen.weight_version, **partial_fields(gen))
    assert out.segments() == [[4, 0, 2], [5, 2, 3]]
    assert out.version_range() == (4, 5)
    assert (out.partial_aborts, out.partial_resumes) == (1, 1)
    plain = AgentOutput(PROMPT, [7, 8], [-1.0, -1.0], "stop", 2)
    assert plain.segments() == [[2, 0, 2]] and plain.version_range() == (2, 2)
    assert partial_fields(Generation([7], [-1.0], "stop", 2)) == {}


def test_a_multi_turn_output_places_each_turns_segments_after_the_observations() -> None:
    traj = Trajectory(list(PROMPT))
    traj.add_generation(Generation([7, 8], [-1.0, -1.0], "stop", 3))
    traj.add_observation([20, 21, 22])
    traj.add_generation(_resumed_generation())
    out = traj.to_output()
    # turn 1: positions 0-1 (v3); observation 2-4; turn 2: 5-6 on v4, 7 on v5
    assert out.segments() == [[3, 0, 2], [4, 5, 7], [5, 7, 8]]
    assert out.version_range() == (3, 5) and out.weight_version == 3
    assert (out.partial_aborts, out.partial_resumes) == (1, 1)
    assert out.loss_mask == [1, 1, 0, 0, 0, 1, 1, 1]


def test_partial_metrics_count_the_trained_samples() -> None:
    tags = [
        {"weight_segments": [[0, 0, 4], [1, 4, 9]], "partial_aborts": 1, "partial_resumes": 1},
        {"weight_segments": [[1, 0, 9]], "partial_aborts": 0, "partial_resumes": 0},
        {"weight_segments": [[0, 0, 2], [1, 2, 3], [2, 3, 9]], "partial_aborts": 3,
         "partial_resumes": 2},
    ]
    meta = KVBatchMeta(("a_0_0", "a_1_0", "b_0_0"), "train", tuple(tags))
    assert partial_metrics(meta) == {"rollout/partial_aborts": 4.0,
                                     "rollout/partial_resumes": 3.0,
                                     "rollout/partial_segments_mean": 2.0}
