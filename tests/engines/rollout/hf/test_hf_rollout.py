"""HF rollout engine: determinism, eos cut, log-probs, async batching, weight updates."""

from __future__ import annotations

import asyncio
import time

import pytest
import torch

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec, SamplingParams
from rlctl.engines.rollout.hf.engine import HFRolloutEngine
from rlctl.engines.train.log_probs import token_log_probs
from rlctl.models.tiny import EOS_ID, build_tiny_tokenizer

RECIPE = Recipe.model_validate({"model": {"path": "tiny", "dtype": "float32"},
                                "data": {"task": "count_digits"}})
PROMPTS = [[1, 5, 6, 7, 14], [1, 9, 14], [1, 4, 4, 4, 4, 4, 14]]


@pytest.fixture(scope="module")
def engine() -> HFRolloutEngine:
    e = HFRolloutEngine(RolloutEngineSpec.from_loaded(validate_recipe(RECIPE)))
    e.load()
    return e


def test_same_seed_same_outputs(engine):
    kw = {"max_new_tokens": 6, "temperature": 1.0, "top_p": 1.0, "top_k": 0}
    a = engine.generate_batch(PROMPTS * 8, seed=3, **kw)
    b = engine.generate_batch(PROMPTS * 8, seed=3, **kw)
    c = engine.generate_batch(PROMPTS * 8, seed=4, **kw)
    assert a == b
    assert [g.token_ids for g in a] != [g.token_ids for g in c]


def test_cut_after_first_eos_and_finish_reason(engine):
    gens = engine.generate_batch(PROMPTS * 30, max_new_tokens=8, temperature=1.0, seed=0)
    reasons = {g.finish_reason for g in gens}
    assert reasons == {"stop", "length"}  # a random model does both within 90 samples
    for g in gens:
        assert len(g.token_ids) == len(g.log_probs) >= 1
        if g.finish_reason == "stop":
            assert g.token_ids[-1] == EOS_ID and EOS_ID not in g.token_ids[:-1]
        else:
            assert len(g.token_ids) == 8 and EOS_ID not in g.token_ids
        assert all(lp <= 0 for lp in g.log_probs)


def test_log_probs_are_those_of_the_tempered_distribution(engine):
    gens = engine.generate_batch(PROMPTS, max_new_tokens=5, temperature=0.6, seed=1)
    with torch.no_grad():
        for prompt, g in zip(PROMPTS, gens, strict=True):
            ids = torch.tensor(prompt + g.token_ids)[None]
            logits = engine.model(ids).logits[:, len(prompt) - 1 : -1]
            want, _ = token_log_probs(logits, torch.tensor(g.token_ids)[None], 0.6, False)
            torch.testing.assert_close(torch.tensor(g.log_probs), want[0], atol=1e-4, rtol=0)


def test_top_k_1_is_greedy_with_log_prob_zero(engine):
    sampled = engine.generate_batch(PROMPTS, max_new_tokens=4, temperature=1.0, top_k=1, seed=5)
    greedy = engine.generate_batch(PROMPTS, max_new_tokens=4, temperature=0.0, seed=9)
    assert [g.token_ids for g in sampled] == [g.token_ids for g in greedy]
    assert all(abs(lp) < 1e-6 for g in sampled for lp in g.log_probs)


def test_concurrent_requests_run_as_one_batch(engine):
    sampling = SamplingParams(max_new_tokens=4, temperature=1.0)
    calls_before = engine._calls

    async def main():
        return await asyncio.gather(*[engine.generate(p, sampling) for p in PROMPTS * 10])

    gens = asyncio.run(main())
    assert engine._calls == calls_before + 1
    assert len(gens) == 30 and all(1 <= len(g.token_ids) <= 4 for g in gens)


def test_nested_sessions_per_prompt_still_make_one_batch(engine):
    # The agent-loop worker gathers prompts, and per prompt gathers n sessions: the session
    # requests start one tick later than the prompt tasks, yet must still share one batch.
    sampling = SamplingParams(max_new_tokens=3, temperature=1.0)
    calls_before = engine._calls

    async def session(prompt):
        return await engine.generate(prompt, sampling)

    async def per_prompt(prompt):
        return await asyncio.gather(*(session(prompt) for _ in range(8)))

    async def main():
        return await asyncio.gather(*(per_prompt(p) for p in PROMPTS * 4))

    groups = asyncio.run(main())
    assert engine._calls == calls_before + 1
    assert [len(g) for g in groups] == [8] * 12


def test_update_weights_changes_generation_and_version():
    e = HFRolloutEngine(RolloutEngineSpec.from_loaded(validate_recipe(RECIPE)))
    e.load()
    before = e.generate_batch(PROMPTS, max_new_tokens=6, temperature=0.0, seed=0)
    state = {k: torch.randn_like(v) for k, v in e.model.state_dict().items()}
    e.update_weights(state, version=7)
    after = e.generate_batch(PROMPTS, max_new_tokens=6, temperature=0.0, seed=0)
    assert e.weight_version == 7 and {g.weight_version for g in after} == {7}
    assert [g.token_ids for g in before] != [g.token_ids for g in after]
    with pytest.raises(ValueError, match="does not match the rollout model"):
        e.update_weights({"not.a.weight": torch.zeros(1)}, version=8)


def test_tokenised_task_prompts_generate_fast(engine):
    tok = build_tiny_tokenizer()
    prompts = [tok(f"{i:07d}=")["input_ids"] for i in range(64)] * 8
    engine.generate_batch(prompts, max_new_tokens=3, temperature=1.0, seed=0)  # warm-up
    times = []
    for seed in range(3):  # best of 3: the cores are shared with other work
        start = time.perf_counter()
        gens = engine.generate_batch(prompts, max_new_tokens=3, temperature=1.0, seed=seed)
        times.append(time.perf_counter() - start)
    assert len(gens) == 512
    # ~0.1 s on an idle 2-core machine, 2-5 s when other jobs load it to 8; the bound only
    # catches a pathological slowdown (e.g. one generate per sample would take minutes).
    assert min(times) < 10.0, f"512 x 3 tokens took {min(times):.2f}s at best"


def test_top_p_renormalises_the_kept_tokens(engine):
    kw = {"max_new_tokens": 4, "temperature": 1.0, "seed": 2}
    full = engine.generate_batch(PROMPTS * 4, top_p=1.0, **kw)
    nucleus = engine.generate_batch(PROMPTS * 4, top_p=0.3, **kw)
    with torch.no_grad():
        for prompt, g in zip(PROMPTS * 4, nucleus, strict=True):
            ids = torch.tensor(prompt + g.token_ids)[None]
            logits = engine.model(ids).logits[:, len(prompt) - 1 : -1]
            untruncated, _ = token_log_probs(logits, torch.tensor(g.token_ids)[None], 1.0, False)
            # Truncation renormalises: each kept token is at least as likely as before.
            assert all(a >= b - 1e-6 for a, b in zip(g.log_probs, untruncated[0].tolist(),
                                                 strict=True))
    assert sum(map(len, (g.token_ids for g in nucleus))) > 0
    assert [g.log_probs for g in full] != [g.log_probs for g in nucleus]


def test_checkpoint_generation_config_does_not_leak(engine):
    # Sampling follows the arguments only (a Qwen generation_config.json sets top_k=20...).
    cfg = engine.model.generation_config
    assert cfg.top_k in (None, 0, 50) and cfg.repetition_penalty in (None, 1.0)


def test_shared_prompt_prefill_gives_the_tokens_and_log_probs_of_a_full_prefill(monkeypatch):
    """A group's requests share one prefill (share_prompts, the default); sampled and greedy
    outputs equal those of prefilling every request, log-probs to float summation order."""
    prompts = [p for p in PROMPTS for _ in range(8)] + [[1, 6]]  # groups and a lone prompt
    outputs = {}
    prefills: list[int] = []
    for share in (False, True):
        options = {"share_prompts": share}
        e = HFRolloutEngine(RolloutEngineSpec.from_loaded(validate_recipe(
            RECIPE.model_copy(update={"engines": RECIPE.engines.model_copy(update={
                "rollout": RECIPE.engines.rollout.model_copy(update={"options": options})})}))))
        e.load()
        shared = e._shared_prefill
        monkeypatch.setattr(e, "_shared_prefill", lambda p, i, m, f=shared: (
            prefills.append(len(out := f(p, i, m))) or out))
        outputs[share] = [e.generate_batch(prompts, max_new_tokens=6, temperature=t, seed=2)
                          for t in (0.0, 1.0)]
    assert prefills == [0, 0, 1, 1]  # the shared runs took the cache path, the others not
    for full, shared in zip(outputs[False], outputs[True], strict=True):
        assert [g.token_ids for g in shared] == [g.token_ids for g in full]
        for a, b in zip(full, shared, strict=True):
            torch.testing.assert_close(torch.tensor(b.log_probs), torch.tensor(a.log_probs),
                                       atol=2e-6, rtol=0)


def test_single_token_prompts_are_prefilled_in_full(engine):
    assert engine._shared_prefill([[1], [1]], torch.ones(2, 1, dtype=torch.long),
                                  torch.ones(2, 1, dtype=torch.long)) == {}
