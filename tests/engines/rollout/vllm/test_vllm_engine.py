"""The vllm rollout engine against a real vLLM server (CPU, eager) on a tiny checkpoint.

Skipped unless vLLM's own environment is built (``rlctl engines install vllm``).
The package's one server (``vllm_server``, ``conftest.py``; about 30-50 s to start on 2 shared
cores) is this module's engine, reset to the checkpoint's weights first; the test that kills
it on purpose runs after the package's other users of it. Tolerances are documented in
``docs/engines.md``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from rlctl.engines.rollout.contract import SamplingParams
from rlctl.engines.rollout.hf.engine import HFRolloutEngine
from rlctl.engines.rollout.server.client import get_json
from rlctl.engines.rollout.server.process import ServerError, live_group_members
from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine
from rlctl.engines.rollout.vllm.options import VLLMWeightSyncOptions
from rlctl.engines.rollout.vllm.weight_sync import VLLMWeightSync
from rlctl.models.tiny import EOS_ID
from rlctl.testing.rollout_contract import RolloutEngineParity, greedy, hf_reference
from rlctl.testing.server_checkpoint import PARITY_PROMPTS
from tests.engines.rollout.server.shared_server import on_checkpoint_weights
from tests.engines.rollout.vllm.vllm_env import (
    engine_spec,
    requires_vllm_env,
    sharpened_state,
    tiny_recipe,
)

pytestmark = [requires_vllm_env, pytest.mark.slow, pytest.mark.timeout(300)]

PROMPTS = PARITY_PROMPTS
LOG_PROB_ATOL = 1e-4  # fp32 on both sides; measured max |diff| is about 1e-6 (docs/engines.md)


def served(engine, path: str):
    """GET ``path`` of the engine's first server, with the run's API key."""
    return get_json(engine.urls[0] + path, api_key=engine.replicas[0].api_key)


@pytest.fixture(scope="module")
def hf(checkpoint: Path) -> HFRolloutEngine:
    return hf_reference(checkpoint)


@pytest.fixture(scope="module")
def engine(vllm_server: VLLMRolloutEngine) -> VLLMRolloutEngine:
    return on_checkpoint_weights(vllm_server, VLLMWeightSync(), sharpened_state(0))


class TestVLLMParity(RolloutEngineParity):
    """Greedy tokens equal hf's; greedy and sampled log-probs equal the trainer's (1e-4)."""

    log_prob_atol = LOG_PROB_ATOL


def test_top_k_log_probs_are_of_the_truncated_distribution(engine, hf):
    top1 = engine.generate_batch(PROMPTS, max_new_tokens=4, temperature=1.0, top_k=1, seed=5)
    assert [g.token_ids for g in top1] == [g.token_ids for g in greedy(engine, n=4)]
    assert all(abs(lp) < 1e-6 for g in top1 for lp in g.log_probs)
    gens = engine.generate_batch(PROMPTS, max_new_tokens=6, temperature=0.8, top_k=4, seed=6)
    with torch.no_grad():
        for prompt, g in zip(PROMPTS, gens, strict=True):
            logits = (
                hf.model(torch.tensor(prompt + g.token_ids)[None]).logits[0, len(prompt) - 1 : -1]
                / 0.8
            )
            kth = logits.topk(4, dim=-1).values[:, -1:]  # [R, 1]
            logp = torch.log_softmax(logits.masked_fill(logits < kth, float("-inf")), dim=-1)
            want = logp.gather(-1, torch.tensor(g.token_ids)[:, None])[:, 0]
            torch.testing.assert_close(torch.tensor(g.log_probs), want, atol=LOG_PROB_ATOL, rtol=0)


def test_same_seed_same_samples(engine):
    kw = {"max_new_tokens": 6, "temperature": 1.0}
    a = engine.generate_batch(PROMPTS * 4, seed=3, **kw)
    b = engine.generate_batch(PROMPTS * 4, seed=3, **kw)
    c = engine.generate_batch(PROMPTS * 4, seed=4, **kw)
    assert a == b
    assert [g.token_ids for g in a] != [g.token_ids for g in c]


def test_eos_ends_a_response_and_is_kept(engine):
    gens = engine.generate_batch(PROMPTS * 20, max_new_tokens=8, temperature=1.5, seed=0)
    assert {g.finish_reason for g in gens} == {"stop", "length"}
    for g in gens:
        assert len(g.token_ids) == len(g.log_probs) >= 1
        if g.finish_reason == "stop":
            assert g.token_ids[-1] == EOS_ID and EOS_ID not in g.token_ids[:-1]
        else:
            assert len(g.token_ids) == 8 and EOS_ID not in g.token_ids


def test_a_json_schema_constrains_decoding(engine):
    """``SamplingParams.json_schema`` (the gateway's JSON response_format) reaches vLLM's
    structured outputs: a random-init model can only answer what the schema allows."""
    from rlctl.models.tiny import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    sampling = SamplingParams(8, temperature=1.0, json_schema=json.dumps({"enum": [3, 7]}))

    async def answers():
        return await asyncio.gather(*(engine.generate(p, sampling) for p in PROMPTS))

    gens = asyncio.run(answers())
    texts = [tok.decode(g.token_ids, skip_special_tokens=True) for g in gens]
    assert all(json.loads(t) in (3, 7) for t in texts), texts
    assert all(g.token_ids[-1] == EOS_ID and len(g.log_probs) == len(g.token_ids) for g in gens)


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


def use_sync(engine, **options) -> VLLMWeightSync:
    """A fresh ``vllm`` weight sync with ``options``: any that the module's servers (started
    with the ``rlctl_cpu`` backend) serve (transport file / http_bytes, buckets, timeout,
    method reload)."""
    return VLLMWeightSync(VLLMWeightSyncOptions(**options))


def transfer_stats(engine, replica) -> dict:
    """The rlctl_cpu engine's counters inside one server (worker extension, /collective_rpc)."""
    answer = engine.run(engine.post(replica, "/collective_rpc", {"method": "rlctl_transfer_stats"}))
    return json.loads(answer["results"][0])


@pytest.mark.parametrize(("transport", "bucket_mb"), [("file", 512), ("http_bytes", 0.05)])
def test_native_sync_changes_generation_stamps_the_version_and_matches_hf(
    engine, hf, transport, bucket_mb
):
    # bucket_mb = 0.05 splits the 0.3 MB model into ~7 buckets, cutting through layers.
    before, stats = greedy(engine), transfer_stats(engine, engine.replicas[0])
    sync = use_sync(engine, transport=transport, bucket_mb=bucket_mb)
    v2 = sharpened_state(1)
    sync(v2, engine, 21)
    print(f"\nnative {transport} sync ({bucket_mb} MB buckets) took {sync.last_update_s:.2f} s")
    after = greedy(engine)
    assert engine.weight_version == 21 and {g.weight_version for g in after} == {21}
    assert served(engine, "/weight_info") == {"weight_version": "21"}
    assert [g.token_ids for g in after] != [g.token_ids for g in before]
    hf.update_weights(v2, version=21)
    assert [g.token_ids for g in after] == [g.token_ids for g in greedy(hf)]
    now = transfer_stats(engine, engine.replicas[0])
    assert now["backend"] == "RlctlCPUTransferEngine" and now["updates"] == stats["updates"] + 1
    assert now["buckets"] - stats["buckets"] == (
        1 if bucket_mb == 512 else len(list(_buckets(v2, bucket_mb)))
    )
    assert list((engine.workdir / "weights").glob("v21-*")) == []  # bucket files are removed
    # And back: the prefix cache must not serve KV computed by the other weights.
    v1 = sharpened_state(0)
    sync(v1, engine, 22)
    hf.update_weights(v1, version=22)
    assert [g.token_ids for g in greedy(engine)] == [g.token_ids for g in before]


def _buckets(state, bucket_mb):
    from rlctl.engines.rollout.buckets import buckets

    return buckets(state, int(bucket_mb * 2**20))


def test_a_server_reporting_another_version_fails_the_check(engine):
    sync = use_sync(engine, transport="file", bucket_mb=512)
    sync(sharpened_state(0), engine, 23)
    with pytest.raises(
        ServerError,
        match=r"server vllm\[0\] reports weight version '23' after the update to version 24",
    ):
        sync._check_versions(engine, 24, sync.options)


def test_reload_fallback_changes_generation_stamps_the_version_and_matches_hf(engine, hf):
    before = greedy(engine)
    v2 = sharpened_state(1)
    sync = use_sync(engine, method="reload")
    sync(v2, engine, 3)
    print(f"\nreload update (file + /collective_rpc reload_weights): {sync.last_update_s:.2f} s")
    after = greedy(engine)
    assert engine.weight_version == 3 and {g.weight_version for g in after} == {3}
    assert [g.token_ids for g in after] != [g.token_ids for g in before]
    hf.update_weights(v2, version=3)
    assert [g.token_ids for g in after] == [g.token_ids for g in greedy(hf)]
    # And back: the prefix cache must not serve KV computed by the other weights.
    v1 = sharpened_state(0)
    sync(v1, engine, 4)
    hf.update_weights(v1, version=4)
    again = greedy(engine)
    assert [g.token_ids for g in again] == [g.token_ids for g in before]
    assert {g.weight_version for g in again} == {4}


def test_the_server_requires_this_runs_api_key(engine):
    """A fresh key per run (as the gateway has): a request without it is refused."""
    import urllib.error
    import urllib.request

    [replica] = engine.replicas
    assert replica.api_key and len(replica.api_key) >= 32
    body = json.dumps({"model": replica.model, "prompt": [1, 2], "max_tokens": 1}).encode()
    for headers in ({}, {"Authorization": "Bearer not-the-key"}):
        request = urllib.request.Request(replica.url + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json", **headers})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 401
    assert replica.api_key not in replica.process.log_path.read_text()


def test_attach_to_a_running_server(engine, monkeypatch):
    monkeypatch.setenv("RLCTL_TEST_VLLM_KEY", engine.replicas[0].api_key)
    recipe = tiny_recipe("unused-in-attach-mode", urls=engine.urls, startup_timeout_s=10,
                         api_key_env="RLCTL_TEST_VLLM_KEY")
    attached = VLLMRolloutEngine(engine_spec(recipe))
    attached.load()
    try:
        assert attached.servers == [] and attached.urls == engine.urls
        assert [g.token_ids for g in greedy(attached)] == [g.token_ids for g in greedy(engine)]
    finally:
        attached.close()
    assert engine.servers[0].alive()  # closing an attached engine leaves the server alone


def test_bad_requests_are_named_errors_and_leave_the_server_serving(engine):
    before, version = greedy(engine, n=4), engine.weight_version
    with pytest.raises(
        ServerError, match=r"server vllm\[0\] answered POST /v1/completions with HTTP 400"
    ):
        # id beyond the vocabulary
        engine.generate_batch([[1, 10_000]], max_new_tokens=2, temperature=0.0)
    # vLLM's worker raises on an unknown name and the whole server dies: refused before sending.
    with pytest.raises(
        ValueError, match=r"version 9 has 1 name\(s\) the served checkpoint does not have"
    ):
        VLLMWeightSync()({"model.no_such.weight": torch.zeros(3)}, engine, 9)
    assert engine.weight_version == version
    assert greedy(engine, n=4) == before


def test_unknown_tensor_name_is_refused_by_the_server_which_keeps_serving(engine, monkeypatch):
    # Attached engines do not read the checkpoint, so the name reaches the server; rlctl's
    # transfer engine checks every name of the sync (sent with the first bucket) before it
    # loads anything, even when the bad name comes in the last of ~7 buckets.
    options = {"transport": "http_bytes", "bucket_mb": 0.05}
    monkeypatch.setenv("RLCTL_TEST_VLLM_KEY", engine.replicas[0].api_key)  # the run's key
    recipe = tiny_recipe("unused-in-attach-mode", urls=engine.urls, startup_timeout_s=10,
                         weight_sync=options, api_key_env="RLCTL_TEST_VLLM_KEY")
    attached = VLLMRolloutEngine(engine_spec(recipe))
    attached.load()
    try:
        before = greedy(attached, n=4)
        bad = {**sharpened_state(0), "model.no_such.weight": torch.zeros(3)}
        with pytest.raises(
            ServerError,
            match=rf"version 31 failed: server {engine.urls[0]} answered POST /update_weights "
                  r"with HTTP 500",
        ):
            VLLMWeightSync(VLLMWeightSyncOptions(**options))(bad, attached, 31)
        # The reason is in the server's log (an attached engine cannot quote it).
        assert (
            "tensor name(s) the served checkpoint does not have"
            in engine.servers[0].log_path.read_text()
        )
        assert attached.weight_version == 0
        # resumed after the failure
        assert served(engine, "/is_paused") == {"is_paused": False}
        # old weights intact
        assert [g.token_ids for g in greedy(attached, n=4)] == [g.token_ids for g in before]
        VLLMWeightSync(VLLMWeightSyncOptions(**options))(sharpened_state(0), attached, 32)
        assert [g.token_ids for g in greedy(attached, n=4)] == [g.token_ids for g in before]
    finally:
        attached.close()


def test_an_update_that_hangs_times_out_naming_the_server(engine):
    server = engine.servers[0]
    sync = use_sync(engine, timeout_s=2.0)
    os.killpg(server.pid, signal.SIGSTOP)  # the server accepts connections but never answers
    try:
        started = time.monotonic()
        with pytest.raises(
            ServerError,
            match=r"version 41 failed: POST .* to server vllm\[0\] failed: "
                  r".*Timeout.*still running",
        ):
            sync(sharpened_state(0), engine, 41)
        assert time.monotonic() - started < 15  # pause times out, the best-effort resume too
    finally:
        os.killpg(server.pid, signal.SIGCONT)
    use_sync(engine, timeout_s=300.0)(sharpened_state(0), engine, 42)  # it serves again
    assert {g.weight_version for g in greedy(engine, n=2)} == {42}


@pytest.mark.kills_shared_server
def test_server_death_during_a_weight_update_names_the_server_and_leaves_nothing(engine):
    # Runs last among the package's server users: it kills the shared server. The server is
    # stopped so the update is certainly in flight when it dies.
    server = engine.servers[0]
    sync = use_sync(engine, timeout_s=60.0)
    os.killpg(server.pid, signal.SIGSTOP)
    errors: list[BaseException] = []

    def update() -> None:
        try:
            sync(sharpened_state(1), engine, 51)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    thread = threading.Thread(target=update)
    thread.start()
    time.sleep(1.0)
    started = time.monotonic()
    os.killpg(server.pid, signal.SIGKILL)
    thread.join(timeout=30)
    assert not thread.is_alive() and time.monotonic() - started < 15
    assert len(errors) == 1 and isinstance(errors[0], ServerError)
    assert "version 51 failed" in str(errors[0]) and "server vllm[0]" in str(errors[0])
    # "died with exit code -9" too, unless the kernel closed the socket a moment before the
    # process became reapable (a race; then: "(it is still running)").
    assert server.popen.wait(timeout=10) == -9
    with pytest.raises(ServerError, match=r"server vllm\[0\] failed: .*died with exit code -9"):
        greedy(engine)  # and a rollout after it fails fast, naming it
    engine.close()
    assert live_group_members(server.pid) == []  # EngineCore and workers are gone too
