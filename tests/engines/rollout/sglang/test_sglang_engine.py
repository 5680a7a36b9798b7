"""The sglang rollout engine against a real SGLang server (CPU, torch_native) on a tiny checkpoint.

Skipped unless SGLang's own environment is built (``rlctl engines install sglang``).
The package's one server (``sglang_server``, ``conftest.py``; 20 s to start on an idle 2-core
machine, minutes under load), on the checkpoint's weights when the module starts; the test that
kills it on purpose runs after the package's other users of it. Tolerances are documented in
``docs/sglang.md``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest
import torch

from rlctl.config.pipeline import validate_recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec, SamplingParams
from rlctl.engines.rollout.hf.engine import HFRolloutEngine
from rlctl.engines.rollout.server.client import get_json
from rlctl.engines.rollout.server.process import ServerError, live_group_members
from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine
from rlctl.engines.rollout.sglang.options import SGLangWeightSyncOptions
from rlctl.engines.rollout.sglang.weight_sync import SGLangWeightSync
from rlctl.models.tiny import EOS_ID
from rlctl.testing.rollout_contract import RolloutEngineParity, greedy, hf_reference
from rlctl.testing.server_checkpoint import PARITY_PROMPTS
from tests.engines.rollout.server.shared_server import on_checkpoint_weights
from tests.engines.rollout.sglang.sglang_env import (
    requires_sglang_env,
    sharpened_state,
    tiny_recipe,
)

pytestmark = [requires_sglang_env, pytest.mark.slow, pytest.mark.timeout(600)]

PROMPTS = PARITY_PROMPTS
LOG_PROB_ATOL = 1e-4  # fp32 on both sides; measured max |diff| in docs/sglang.md


def served(engine, path: str):
    """GET ``path`` of the engine's first server, with the run's API key."""
    return get_json(engine.urls[0] + path, api_key=engine.replicas[0].api_key)


@pytest.fixture(scope="module")
def hf(checkpoint: Path) -> HFRolloutEngine:
    return hf_reference(checkpoint)


@pytest.fixture(scope="module")
def engine(sglang_server: SGLangRolloutEngine) -> SGLangRolloutEngine:
    """The package's server, through the engine that owns it, on the checkpoint's weights."""
    return on_checkpoint_weights(sglang_server, SGLangWeightSync(), sharpened_state(0))


class TestSGLangParity(RolloutEngineParity):
    """Greedy tokens equal hf's; greedy and sampled log-probs equal the trainer's (1e-4)."""

    log_prob_atol = LOG_PROB_ATOL


def test_sampled_tokens_follow_the_temperature_scaled_softmax(engine, hf):
    # Matching log-probs of the drawn tokens is not enough: the draws themselves must follow
    # softmax(logits / T). 1,500 one-token samples from one prompt; their total-variation
    # distance to the exact distribution must be of the size chance alone gives.
    prompt, temperature, n = PROMPTS[0], 0.8, 1500
    gens = engine.generate_batch([prompt] * n, max_new_tokens=1, temperature=temperature)
    counts = torch.bincount(torch.tensor([g.token_ids[0] for g in gens]), minlength=32).double()
    with torch.no_grad():
        logits = hf.model(torch.tensor(prompt)[None]).logits[0, -1].double()  # [V]
    want = torch.softmax(logits / temperature, dim=-1)
    tv = float((counts / n - want).abs().sum() / 2)
    # E|count/n - p| ~ sqrt(2 p (1 - p) / (pi n)) per token (normal approximation)
    chance = float((2 * want * (1 - want) / (torch.pi * n)).sqrt().sum() / 2)
    # what a T = 1 sampler would show
    at_t1 = float((torch.softmax(logits, -1) - want).abs().sum() / 2)
    print(
        f"\nsampled-token TV to softmax(logits / T) = {tv:.3f} (chance ~{chance:.3f}; T = 1 would "
        f"add {at_t1:.3f})"
    )
    assert tv < 2.5 * chance


def test_eos_ends_a_response_and_is_kept(engine):
    gens = engine.generate_batch(PROMPTS * 20, max_new_tokens=8, temperature=1.5, seed=0)
    assert {g.finish_reason for g in gens} == {"stop", "length"}
    for g in gens:
        assert len(g.token_ids) == len(g.log_probs) >= 1
        if g.finish_reason == "stop":
            assert g.token_ids[-1] == EOS_ID and EOS_ID not in g.token_ids[:-1]
        else:
            assert len(g.token_ids) == 8 and EOS_ID not in g.token_ids


def test_concurrent_requests_from_fresh_event_loops(engine):
    # The rollout worker runs each step in a new asyncio.run(): the engine must serve them all.
    sampling = SamplingParams(max_new_tokens=32, temperature=1.0)

    async def step():
        return await asyncio.gather(*(engine.generate(p, sampling) for p in PROMPTS * 11))

    asyncio.run(step())  # warm-up
    started = time.perf_counter()
    gens = asyncio.run(step())
    elapsed = time.perf_counter() - started
    tokens = sum(len(g.token_ids) for g in gens)
    print(
        f"\n{len(gens)} concurrent requests, {tokens} tokens in {elapsed:.2f} s = "
        f"{tokens / elapsed:.0f} tok/s"
    )
    assert len(gens) == 66 and all(1 <= len(g.token_ids) <= 32 for g in gens)


@pytest.mark.parametrize("transport", ["tensor", "distributed", "disk"])
def test_weight_sync_changes_generation_stamps_the_version_and_matches_hf(engine, hf, transport):
    before = greedy(engine)
    version = engine.weight_version
    sync = SGLangWeightSync(SGLangWeightSyncOptions(transport=transport, bucket_mb=1))
    v2 = sharpened_state(1)
    sync(v2, engine, version + 1)  # what the rollout worker calls
    print(f"\n{transport} weight update took {sync.last_update_s:.2f} s")
    after = greedy(engine)
    assert {g.weight_version for g in after} == {version + 1}
    assert served(engine, "/model_info")["weight_version"] == str(version + 1)
    assert [g.token_ids for g in after] != [g.token_ids for g in before]
    hf.update_weights(v2, version + 1)
    assert [g.token_ids for g in after] == [g.token_ids for g in greedy(hf)]
    # And back: the radix cache must not serve KV computed by the other weights.
    v1 = sharpened_state(0)
    sync(v1, engine, version + 2)
    hf.update_weights(v1, version + 2)
    again = greedy(engine)
    assert [g.token_ids for g in again] == [g.token_ids for g in before]
    assert {g.weight_version for g in again} == {version + 2}
    sync.close()  # leaves the distributed group while the server runs (the worker's order)


def test_a_version_the_engine_did_not_set_fails_loudly(engine):
    version = engine.weight_version
    # Someone else changes the server's weights/version behind the engine's back.
    engine.run(engine.post(engine.replicas[0], "/update_weight_version", {"new_version": "999"}))
    try:
        with pytest.raises(
            ServerError,
            match=r"sglang\[0\] generated with weight version '999', but the engine expects",
        ):
            greedy(engine, n=2)
    finally:
        engine.run(
            engine.post(engine.replicas[0], "/update_weight_version", {"new_version": str(version)})
        )
    assert served(engine, "/model_info")["weight_version"] == str(version)
    assert {g.weight_version for g in greedy(engine, n=2)} == {version}


def test_the_server_requires_this_runs_api_key(engine):
    """A fresh key per run (as the gateway has): a request without it is refused, and no
    command line shows it."""
    import urllib.error
    import urllib.request

    [replica] = engine.replicas
    assert replica.api_key and len(replica.api_key) >= 32
    body = json.dumps({"input_ids": [1], "sampling_params": {"max_new_tokens": 1}}).encode()
    request = urllib.request.Request(replica.url + "/generate", data=body,
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401
    assert replica.api_key not in " ".join(replica.process.command.argv)


def test_attach_to_a_running_server(engine, monkeypatch):
    monkeypatch.setenv("RLCTL_TEST_SGLANG_KEY", engine.replicas[0].api_key)
    recipe = tiny_recipe("unused-in-attach-mode", urls=engine.urls, startup_timeout_s=30,
                         api_key_env="RLCTL_TEST_SGLANG_KEY")
    attached = SGLangRolloutEngine(RolloutEngineSpec.from_loaded(validate_recipe(recipe)))
    attached.load()
    try:
        # It attaches to a server already updated: what a sync would have stamped.
        attached.stamp_version(engine.weight_version)
        assert attached.servers == [] and attached.urls == engine.urls
        assert [g.token_ids for g in greedy(attached)] == [g.token_ids for g in greedy(engine)]
    finally:
        attached.close()
    assert engine.servers[0].alive()  # closing an attached engine leaves the server alone


def test_bad_requests_are_named_errors_and_leave_the_server_serving(engine):
    before, version = greedy(engine, n=4), engine.weight_version
    # SGLang's CPU path would die on an id past the embedding (IndexError): refused before sending.
    with pytest.raises(
        ValueError,
        match=r"prompt token ids \[10000\] are outside the model's vocabulary \(size 32\)",
    ):
        engine.generate_batch([[1, 10_000]], max_new_tokens=2, temperature=0.0)
    with pytest.raises(
        ServerError, match=r"server sglang\[0\] answered POST /generate with HTTP 400"
    ):
        engine.generate_batch([[1, 2]], max_new_tokens=-1, temperature=0.0)  # the server says no
    with pytest.raises(
        ValueError, match=r"version 9 has 1 name\(s\) the served checkpoint does not have"
    ):
        SGLangWeightSync()({"model.no_such.weight": torch.zeros(3)}, engine, 9)
    assert engine.weight_version == version
    after = greedy(engine, n=4)  # same tokens; log-probs within float noise (batching differs)
    assert [g.token_ids for g in after] == [g.token_ids for g in before]
    assert (
        max(abs(a - b) for g, h in zip(after, before, strict=True)
            for a, b in zip(g.log_probs, h.log_probs, strict=True))
        < LOG_PROB_ATOL
    )


@pytest.mark.kills_shared_server
def test_server_death_mid_rollout_names_the_server_and_leaves_nothing(engine):
    # Runs after the other users of the package's server (conftest.py): it kills it.
    server = engine.servers[0]
    os.killpg(server.pid, signal.SIGKILL)
    server.popen.wait(timeout=10)
    started = time.monotonic()
    with pytest.raises(ServerError, match=r"server sglang\[0\] failed: .*died with exit code -9"):
        greedy(engine)
    assert time.monotonic() - started < 10
    engine.close()
    assert live_group_members(server.pid) == []  # scheduler and detokenizer are gone too
