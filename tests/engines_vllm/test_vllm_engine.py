"""The vllm rollout engine against a real vLLM server (CPU, eager) on a tiny checkpoint.

Skipped unless vLLM's own environment is built (``scripts/build_engine_envs.sh vllm``).
One server runs for the whole module (about 30-50 s to start on 2 shared cores); the last test
kills it on purpose. Tolerances are documented in ``docs/engines.md``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
import torch
from vllm_env import VLLM_PYTHON, requires_vllm_env, tiny_recipe

from rlctl.engines.fsdp_engine import token_log_probs
from rlctl.engines.hf_rollout import HFRolloutEngine
from rlctl.engines.rollout_engine import RolloutEngineSpec, SamplingParams
from rlctl.engines.vllm_rollout import VLLMRolloutEngine
from rlctl.engines.server_process import ServerError, live_group_members
from rlctl.models.loading import load_causal_lm, load_tokenizer
from rlctl.models.tiny import EOS_ID

pytestmark = [requires_vllm_env, pytest.mark.slow, pytest.mark.timeout(300)]

# Prompts of different lengths (token ids of the 32-token tiny vocabulary, <bos> = 1).
PROMPTS = [[1, 5, 6, 7, 14], [1, 9, 14], [1, 4, 4, 4, 4, 4, 14], [1, 20, 21, 22], [1, 30], [1, 8, 7, 6, 5, 4, 3]]
LOG_PROB_ATOL = 1e-4  # fp32 on both sides; measured max |diff| is about 1e-6 (docs/engines.md)


def sharpened_state(seed: int) -> dict[str, torch.Tensor]:
    """Tiny-model weights with larger values than the 0.02-std init.

    The default init gives a near-uniform next-token distribution, whose greedy answer is the
    same token over and over; sharper weights make greedy parity and weight updates visible.
    """
    model = load_causal_lm(tiny_recipe().model, seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.15)
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """The tiny model (sharpened, seed 0) and tokenizer saved with ``save_pretrained``."""
    out = tmp_path_factory.mktemp("tiny-vllm")
    recipe = tiny_recipe()
    model = load_causal_lm(recipe.model, 0)
    model.load_state_dict(sharpened_state(0))
    model.save_pretrained(out)
    load_tokenizer(recipe.model).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def hf(checkpoint) -> HFRolloutEngine:
    engine = HFRolloutEngine(RolloutEngineSpec(tiny_recipe(str(checkpoint)), seed=0))
    engine.load()
    return engine


@pytest.fixture(scope="module")
def engine(checkpoint):
    recipe = tiny_recipe(str(checkpoint), python=VLLM_PYTHON, startup_timeout_s=240)
    e = VLLMRolloutEngine(RolloutEngineSpec(recipe, seed=0))
    started = time.monotonic()
    e.load()
    print(f"\nvllm server up (health + warm-up) in {time.monotonic() - started:.1f} s")
    yield e
    e.close()


def greedy(e, prompts=PROMPTS, n=12):
    return e.generate_batch(prompts, max_new_tokens=n, temperature=0.0, seed=0)


def test_greedy_tokens_equal_hf_and_log_probs_agree(engine, hf):
    ours, theirs = greedy(engine), greedy(hf)
    assert [g.token_ids for g in ours] == [g.token_ids for g in theirs]
    assert len({t for g in ours for t in g.token_ids}) > 3  # not one token repeated
    diff = max(abs(a - b) for g, h in zip(ours, theirs) for a, b in zip(g.log_probs, h.log_probs))
    print(f"\ngreedy log-prob max |vllm - hf| = {diff:.2e}")
    assert diff < LOG_PROB_ATOL
    assert {g.weight_version for g in ours} == {0}


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_log_probs_equal_the_trainers(engine, hf, temperature):
    # The importance ratio in the loss compares these with the trainer's log_softmax(logits / T).
    gens = engine.generate_batch(PROMPTS, max_new_tokens=8, temperature=temperature, seed=11)
    worst = 0.0
    with torch.no_grad():
        for prompt, g in zip(PROMPTS, gens, strict=True):
            ids = torch.tensor(prompt + g.token_ids)[None]
            logits = hf.model(ids).logits[:, len(prompt) - 1 : -1]  # [1, R, V]
            want, _ = token_log_probs(logits, torch.tensor(g.token_ids)[None], temperature, False)
            worst = max(worst, float((torch.tensor(g.log_probs) - want[0]).abs().max()))
    print(f"\nT={temperature}: sampled log-prob max |vllm - trainer| = {worst:.2e}")
    assert worst < LOG_PROB_ATOL


def test_top_k_log_probs_are_of_the_truncated_distribution(engine, hf):
    top1 = engine.generate_batch(PROMPTS, max_new_tokens=4, temperature=1.0, top_k=1, seed=5)
    assert [g.token_ids for g in top1] == [g.token_ids for g in greedy(engine, n=4)]
    assert all(abs(lp) < 1e-6 for g in top1 for lp in g.log_probs)
    gens = engine.generate_batch(PROMPTS, max_new_tokens=6, temperature=0.8, top_k=4, seed=6)
    with torch.no_grad():
        for prompt, g in zip(PROMPTS, gens, strict=True):
            logits = hf.model(torch.tensor(prompt + g.token_ids)[None]).logits[0, len(prompt) - 1 : -1] / 0.8
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
    print(f"\n{len(gens)} concurrent requests, {tokens} tokens in {elapsed:.2f} s = {tokens / elapsed:.0f} tok/s")
    assert len(gens) == 66 and all(1 <= len(g.token_ids) <= 32 for g in gens)


def test_weight_update_changes_generation_stamps_the_version_and_matches_hf(engine, hf):
    before = greedy(engine)
    v2 = sharpened_state(1)
    engine.update_weights(v2, version=3)
    print(f"\nweight update (file + /collective_rpc reload_weights) took {engine.last_update_s:.2f} s")
    after = greedy(engine)
    assert engine.weight_version == 3 and {g.weight_version for g in after} == {3}
    assert [g.token_ids for g in after] != [g.token_ids for g in before]
    hf.update_weights(v2, version=3)
    assert [g.token_ids for g in after] == [g.token_ids for g in greedy(hf)]
    # And back: the prefix cache must not serve KV computed by the other weights.
    v1 = sharpened_state(0)
    engine.update_weights(v1, version=4)
    hf.update_weights(v1, version=4)
    again = greedy(engine)
    assert [g.token_ids for g in again] == [g.token_ids for g in before]
    assert {g.weight_version for g in again} == {4}


def test_attach_to_a_running_server(engine):
    recipe = tiny_recipe("unused-in-attach-mode", urls=engine.urls, startup_timeout_s=10)
    attached = VLLMRolloutEngine(RolloutEngineSpec(recipe, seed=0))
    attached.load()
    try:
        assert attached.servers == [] and attached.urls == engine.urls
        assert [g.token_ids for g in greedy(attached)] == [g.token_ids for g in greedy(engine)]
    finally:
        attached.close()
    assert engine.servers[0].alive()  # closing an attached engine leaves the server alone


def test_bad_requests_are_named_errors_and_leave_the_server_serving(engine):
    before, version = greedy(engine, n=4), engine.weight_version
    with pytest.raises(ServerError, match=r"server vllm\[0\] answered POST /v1/completions with HTTP 400"):
        engine.generate_batch([[1, 10_000]], max_new_tokens=2, temperature=0.0)  # id beyond the vocabulary
    # vLLM's worker raises on an unknown name and the whole server dies: refused before sending.
    with pytest.raises(ValueError, match=r"version 9 has 1 name\(s\) the served checkpoint does not have"):
        engine.update_weights({"model.no_such.weight": torch.zeros(3)}, version=9)
    assert engine.weight_version == version
    assert greedy(engine, n=4) == before


def test_server_death_mid_rollout_names_the_server_and_leaves_nothing(engine):
    # Runs last: it kills the module's server.
    server = engine.servers[0]
    os.killpg(server.pid, signal.SIGKILL)
    server.popen.wait(timeout=10)
    started = time.monotonic()
    with pytest.raises(ServerError, match=r"server vllm\[0\] failed: .*died with exit code -9"):
        greedy(engine)
    assert time.monotonic() - started < 10
    engine.close()
    assert live_group_members(server.pid) == []  # EngineCore and workers are gone too
