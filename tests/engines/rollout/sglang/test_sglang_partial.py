"""Partial rollouts on a real SGLang server (CPU, torch_native attention): weight updates in
the middle of long responses abort the requests in flight, which resume on the new weights
keeping their tokens.

Skipped unless SGLang's own environment is built (``rlctl engines install sglang``). One server
for the module (about 40-70 s to start on 2 shared cores); the updates go through the real
``sglang`` weight sync (``tensor`` transport) inside the engine's ``weight_update``, as the
rollout worker runs them.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.server.process import ServerError
from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine
from rlctl.engines.rollout.sglang.weight_sync import SGLangWeightSync
from rlctl.testing.server_checkpoint import save_server_checkpoint
from tests.engines.rollout.server.partial_checks import (
    MAX_NEW,
    PROMPTS,
    Reference,
    check_segments,
    continuations,
    interrupted,
    summary,
    uninterrupted,
)
from tests.engines.rollout.sglang.sglang_env import (
    SGLANG_PYTHON,
    requires_sglang_env,
    sharpened_state,
    tiny_recipe,
)

pytestmark = [requires_sglang_env, pytest.mark.slow, pytest.mark.timeout(300)]

LOG_PROB_ATOL = 1e-4  # fp32; a resumed request re-reads its tokens in one prefill (~1e-6)


def partial_recipe(checkpoint: Path) -> Recipe:
    recipe = tiny_recipe(str(checkpoint), python=SGLANG_PYTHON, startup_timeout_s=300,
                         ignore_eos=True)  # every response is exactly MAX_NEW tokens
    data = recipe.model_dump()
    data["algorithm"]["staleness"]["partial_rollout"] = "resume"
    return Recipe.model_validate(data)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    checkpoint = save_server_checkpoint(tmp_path_factory.mktemp("tiny-sglang-partial"))
    e = SGLangRolloutEngine(RolloutEngineSpec(partial_recipe(checkpoint)))
    e.load()
    yield e
    e.close()


@pytest.fixture(scope="module")
def reference(engine) -> Reference:
    """The uninterrupted greedy responses on the checkpoint's weights (version 0)."""
    ref = uninterrupted(engine)
    print(f"\nuninterrupted batch: {ref.took_s:.1f} s")
    return ref


def test_resumed_on_the_same_weights_the_response_is_the_uninterrupted_one(engine, reference):
    # updates with unchanged weights: every resumed request must continue exactly where it
    # was cut (greedy), so the response is token for token the uninterrupted one
    same = sharpened_state(0)
    started = time.monotonic()
    run = interrupted(engine, SGLangWeightSync(), [same], first_after_s=0.25 * reference.took_s,
                      every_s=0.2 * reference.took_s)
    print(f"\nsglang, same weights: {summary(run)} in {time.monotonic() - started:.1f} s")
    check_segments(run, start_version=0)
    assert [g.token_ids for g in run.gens] == [r.token_ids for r in reference.gens]
    for g, r in zip(run.gens, reference.gens, strict=True):
        torch.testing.assert_close(torch.tensor(g.log_probs), torch.tensor(r.log_probs),
                                   atol=LOG_PROB_ATOL, rtol=0)


def test_each_segment_comes_from_the_weights_of_its_version(engine, reference):
    # One update to other weights mid-response: the tokens before the cut are the old
    # weights' greedy ones, the tokens after it the new weights' greedy continuation of
    # (prompt + tokens before the cut), with the new weights' log-probs.
    start = engine.weight_version
    run = interrupted(engine, SGLangWeightSync(), [sharpened_state(1)], max_updates=1,
                      first_after_s=0.4 * reference.took_s)
    print(f"\nsglang, new weights: {summary(run)}")
    check_segments(run, start_version=start)
    (new,) = run.updates
    cut = [g.weight_segments()[0].end if g.weight_version == start else 0 for g in run.gens]
    resumed = [i for i, g in enumerate(run.gens) if g.weight_segments()[-1].version == new]
    assert resumed, "no response went on with the new weights"
    for g, r, c in zip(run.gens, reference.gens, cut, strict=True):
        assert g.token_ids[:c] == r.token_ids[:c]  # the old weights' tokens, kept as they were
        torch.testing.assert_close(torch.tensor(g.log_probs[:c]), torch.tensor(r.log_probs[:c]),
                                   atol=LOG_PROB_ATOL, rtol=0)
    after = continuations(engine, [PROMPTS[i] + run.gens[i].token_ids[:cut[i]] for i in resumed],
                          [MAX_NEW - cut[i] for i in resumed])
    for i, a in zip(resumed, after, strict=True):
        g = run.gens[i]
        assert g.token_ids[cut[i]:] == a.token_ids
        torch.testing.assert_close(torch.tensor(g.log_probs[cut[i]:]), torch.tensor(a.log_probs),
                                   atol=LOG_PROB_ATOL, rtol=0)
    # the old weights back, for what follows
    with engine.weight_update(timeout_s=60):
        SGLangWeightSync()(sharpened_state(0), engine, new + 1)


def test_a_server_that_never_answers_the_abort_fails_the_update_loudly(engine):
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("gens", engine.generate_batch(
        PROMPTS, max_new_tokens=MAX_NEW, temperature=0.0)), daemon=True)
    thread.start()
    while engine.requests_in_flight < len(PROMPTS):
        time.sleep(0.01)
    server = engine.servers[0]
    os.killpg(server.pid, signal.SIGSTOP)  # accepts connections, answers nothing
    try:
        started = time.monotonic()
        with pytest.raises(ServerError, match=r"aborting the requests in flight at a weight "
                                              r"update failed: POST .*/abort_request to server "
                                              r"sglang\[0\] failed: .*Timeout"), \
                engine.weight_update(timeout_s=3.0):
            pytest.fail("the update must not start while requests are still in flight")
        assert time.monotonic() - started < 10
    finally:
        os.killpg(server.pid, signal.SIGCONT)
    thread.join(timeout=120)
    # the gate opened again: the batch ends (resumed if the late abort reached the server)
    assert [len(g.token_ids) for g in out["gens"]] == [MAX_NEW] * len(PROMPTS)
