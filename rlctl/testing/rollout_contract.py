"""Rollout-engine parity with ``hf`` as a pytest class: built-in and third-party engines run it.

A rollout engine's samples feed the importance ratio of the policy loss, so its tokens and
log-probs must be those of the trainer's model. This contract checks it against the in-process
``hf`` engine on the same tiny checkpoint (:mod:`rlctl.testing.server_checkpoint`). Use it
from a test module of your engine::

    import pytest
    from rlctl.config.pipeline import validate_recipe
    from rlctl.engines.rollout.contract import RolloutEngineSpec
    from rlctl.testing.rollout_contract import RolloutEngineParity, hf_reference
    from rlctl.testing.server_checkpoint import save_server_checkpoint, server_tiny_recipe

    @pytest.fixture(scope="module")
    def checkpoint(tmp_path_factory):
        return save_server_checkpoint(tmp_path_factory.mktemp("tiny"))

    @pytest.fixture(scope="module")
    def hf(checkpoint):
        return hf_reference(checkpoint)

    @pytest.fixture(scope="module")
    def engine(checkpoint):
        loaded = validate_recipe(server_tiny_recipe("mine", str(checkpoint)))
        e = MyEngine(RolloutEngineSpec.from_loaded(loaded))
        e.load()
        yield e
        e.close()

    class TestMyEngineParity(RolloutEngineParity):
        log_prob_atol = 1e-4

Tolerance: fp32 on both sides; vLLM and SGLang agree with ``hf`` to a few 1e-6
(docs/engines.md, docs/sglang.md), and the default asserts 1e-4.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from rlctl.engines.rollout.contract import Generation, RolloutEngineSpec
from rlctl.testing.server_checkpoint import PARITY_PROMPTS, server_tiny_recipe


def hf_reference(checkpoint: Path | str) -> Any:
    """The ``hf`` engine on ``checkpoint`` (loaded; the reference of the parity tests)."""
    from rlctl.config.pipeline import validate_recipe
    from rlctl.engines.rollout.hf.engine import HFRolloutEngine

    loaded = validate_recipe(server_tiny_recipe("hf", str(checkpoint)))
    engine = HFRolloutEngine(RolloutEngineSpec.from_loaded(loaded))
    engine.load()
    return engine


def greedy(engine: Any, prompts: list[list[int]] = PARITY_PROMPTS, n: int = 12) -> list[Generation]:
    """Greedy generations of ``n`` tokens for ``prompts`` (blocking ``generate_batch``)."""
    return engine.generate_batch(prompts, max_new_tokens=n, temperature=0.0, seed=0)


def trainer_log_probs(
    hf: Any, prompt: list[int], tokens: list[int], temperature: float
) -> torch.Tensor:
    """The trainer's ``log_softmax(logits / T)`` of ``tokens`` after ``prompt``: ``[R]``."""
    from rlctl.engines.train.log_probs import token_log_probs

    with torch.no_grad():
        # [1, R, V]
        logits = hf.model(torch.tensor(prompt + tokens)[None]).logits[:, len(prompt) - 1 : -1]
        want, _ = token_log_probs(logits, torch.tensor(tokens)[None], temperature, False)
    return want[0]


def trained_adapter(recipe: Any, seed: int) -> Any:
    """LoRA adapters (``recipe.model.lora``) on ``recipe.model`` with every matrix drawn from
    ``seed``, as an ``AdapterWeights`` to sync: B is not zero, so the adapter changes the
    model (a fresh adapter's B is, and would test nothing). For LoRA parity tests: sync it to
    the engine under test and to :func:`hf_reference`'s ``update_adapter``, then compare."""
    from rlctl.models.loading import load_causal_lm
    from rlctl.models.lora import AdapterWeights, adapter_state, add_adapters, config_dict

    lm = load_causal_lm(recipe.model, seed=0)
    peft = add_adapters(lm, recipe.model.lora, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    trained = {}
    with torch.no_grad():
        for name, p in lm.named_parameters():
            if p.requires_grad:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
                trained[name] = p.detach().clone()
    return AdapterWeights(adapter_state(peft, trained), config_dict(peft))


def max_log_prob_diff(hf: Any, gens: list[Generation], sampled: list[Generation],
                      version: int) -> float:
    """The largest |engine - trainer| log-prob over a greedy run (``gens``, scored at T = 1)
    and a T = 0.8 one (``sampled``) of :data:`PARITY_PROMPTS`, each generated at
    ``version``."""
    worst = 0.0
    for runs, temperature in ((gens, 1.0), (sampled, 0.8)):
        for prompt, g in zip(PARITY_PROMPTS, runs, strict=True):
            assert g.weight_version == version
            want = trainer_log_probs(hf, prompt, g.token_ids, temperature)
            worst = max(worst, float((torch.tensor(g.log_probs) - want).abs().max()))
    return worst


def check_adapter_sync(engine: Any, sync: Any, recipe: Any, hf: Any, version: int, *,
                       before: list[list[int]], timeout_s: float) -> float:
    """Sync :func:`trained_adapter` (seed ``version``) to an adapter-loading server engine
    (vLLM's, SGLang's) and to ``hf``; check that the engine serves that version's adapter
    alone, keeps only its files, and decodes ``hf``'s greedy tokens (not ``before``, the
    base model's, at version 1). Returns :func:`max_log_prob_diff` for the caller's bound."""
    adapter = trained_adapter(recipe, seed=version)
    with engine.weight_update(timeout_s=timeout_s):
        sync(adapter, engine, version)
    hf.update_adapter(adapter, version)  # hf.model is now the trainer's adapted module
    assert engine.adapter == f"rlctl-lora-v{version}"
    (replica,) = engine.replicas
    served = {m["id"] for m in engine.run(engine.get(replica, "/v1/models"))["data"]}
    assert {"rlctl-lora-v1", "rlctl-lora-v2"} & served == {engine.adapter}
    staged = sorted(p.name for p in (engine.workdir / "weights").iterdir())
    assert staged == [f"adapter-v{version}"]  # the previous version's files are gone
    gens = greedy(engine)
    assert [g.token_ids for g in gens] == [g.token_ids for g in greedy(hf)]
    if version == 1:
        assert [g.token_ids for g in gens] != before  # the adapter changed the policy
    sampled = engine.generate_batch(PARITY_PROMPTS, max_new_tokens=8, temperature=0.8,
                                    seed=version)
    return max_log_prob_diff(hf, gens, sampled, version)


class RolloutEngineParity:
    """Greedy tokens equal ``hf``'s; log-probs equal the trainer's, greedy and sampled."""

    log_prob_atol: float = 1e-4
    """Largest |engine - reference| log-prob accepted (fp32 on both sides)."""

    # The fixtures ``engine`` (your engine, loaded) and ``hf`` (``hf_reference(checkpoint)``)
    # come from the test module, usually module-scoped so one server serves every test; they
    # are not declared here, because a class fixture would shadow the module's.

    def test_greedy_tokens_equal_hf_and_log_probs_agree(self, engine, hf):
        ours, theirs = greedy(engine), greedy(hf)
        assert [g.token_ids for g in ours] == [g.token_ids for g in theirs]
        # a sharp model: not one token repeated
        assert len({t for g in ours for t in g.token_ids}) > 3
        diff = max(abs(a - b) for g, h in zip(ours, theirs, strict=True)
                   for a, b in zip(g.log_probs, h.log_probs, strict=True))
        print(f"\ngreedy log-prob max |{type(engine).__name__} - hf| = {diff:.2e}")
        assert diff < self.log_prob_atol
        assert {g.weight_version for g in ours} == {engine.weight_version}

    @pytest.mark.parametrize("temperature", [1.0, 0.7])
    def test_sampled_log_probs_equal_the_trainers(self, engine, hf, temperature):
        # The importance ratio in the loss compares these with the trainer's log_softmax(logits /
        # T).
        gens = engine.generate_batch(
            PARITY_PROMPTS, max_new_tokens=8, temperature=temperature, seed=11
        )
        worst = 0.0
        for prompt, g in zip(PARITY_PROMPTS, gens, strict=True):
            want = trainer_log_probs(hf, prompt, g.token_ids, temperature)
            worst = max(worst, float((torch.tensor(g.log_probs) - want).abs().max()))
        print(
            f"\nT={temperature}: sampled log-prob max |{type(engine).__name__} - trainer| = "
            f"{worst:.2e}"
        )
        assert worst < self.log_prob_atol
