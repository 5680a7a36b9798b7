"""The shared-prompt forward (rlctl/engines/train/shared_prompt.py) against the padded one."""

from __future__ import annotations

import pytest
import torch

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import TinyModelSection
from rlctl.engines.train.batch import ModelBatch
from rlctl.engines.train.shared_prompt import (
    every_row_alone,
    prompt_groups,
    shared_prompt_logits,
)
from rlctl.models.tiny import PAD_ID, build_tiny_model


def grouped_batch(response_lengths: list[int]) -> ModelBatch:
    """Three prompts of different lengths, drawn 2, 3 and 1 times (rows 0-1, 2-4, 5)."""
    g = torch.Generator().manual_seed(5)
    distinct = [torch.randint(4, 30, (n,), generator=g) for n in (3, 7, 5)]
    prompts = [distinct[i] for i in (0, 0, 1, 1, 1, 2)]
    responses = [torch.randint(4, 30, (n,), generator=g) for n in response_lengths]
    return ModelBatch.from_samples(prompts, responses, PAD_ID)


def padded_logits(model: torch.nn.Module, mb: ModelBatch) -> torch.Tensor:
    return model(input_ids=mb.input_ids, attention_mask=mb.attention_mask,
                 position_ids=mb.position_ids, use_cache=False,
                 logits_to_keep=mb.response_width + 1).logits[:, :-1]


def test_prompt_groups_finds_each_distinct_prompt_once() -> None:
    mb = grouped_batch([2, 3, 1, 4, 2, 3])
    groups = prompt_groups(mb)
    assert groups is not None
    assert sorted(groups.first.tolist()) == [0, 2, 5]
    # every row points at a row with its own prompt
    rep = groups.first[groups.inverse]
    assert rep.tolist() == [0, 0, 2, 2, 2, 5]


def test_no_shared_prompt_means_no_groups() -> None:
    mb = ModelBatch.from_samples([[5, 6], [5, 7], [6]], [[8], [9, 9], [10]], PAD_ID)
    assert prompt_groups(mb) is None


def test_the_same_tokens_with_other_padding_are_another_prompt() -> None:
    # [pad 5 6] (a 2-token prompt) differs from a 3-token prompt that starts with the pad id
    mb = ModelBatch.from_samples([[5, 6], [PAD_ID, 5, 6], [5, 6]], [[8], [8], [9]], PAD_ID)
    groups = prompt_groups(mb)
    assert groups is not None and len(groups.first) == 2
    assert groups.inverse[0] == groups.inverse[2] != groups.inverse[1]


@pytest.mark.parametrize(("lengths", "two_calls", "alone"), [
    ([2, 3, 1, 4, 2, 3], False, False),
    ([1, 1, 1, 1, 1, 1], False, False),
    ([1, 1, 1, 1, 1, 1], True, False),
    ([2, 3, 1, 4, 2, 3], True, True),
], ids=["responses of 1-4 tokens", "one-token responses", "one-token responses, two calls",
        "every row alone (a sharded rank with nothing shared)"])
def test_shared_logits_and_gradients_equal_the_padded_forward(lengths, two_calls, alone) -> None:
    mb = grouped_batch(lengths)
    groups = every_row_alone(mb) if alone else prompt_groups(mb)
    assert groups is not None
    weights = torch.randn(mb.responses.shape, generator=torch.Generator().manual_seed(1))
    grads = []
    for shared in (False, True):
        model = build_tiny_model(TinyModelSection(), seed=2).train()
        logits = (shared_prompt_logits(model, mb, groups, two_calls=two_calls) if shared
                  else padded_logits(model, mb))
        log_probs = torch.log_softmax(logits, -1).gather(-1, mb.responses[..., None])[..., 0]
        (log_probs * weights * mb.response_mask).sum().backward()
        grads.append(({k: p.grad.clone() for k, p in model.named_parameters()}, log_probs))
    (base, base_lp), (got, got_lp) = grads
    mask = mb.response_mask.bool()
    torch.testing.assert_close(got_lp[mask], base_lp[mask], atol=2e-6, rtol=0)
    for name, grad in base.items():
        torch.testing.assert_close(got[name], grad, atol=2e-6, rtol=1e-5)
    assert max(g.abs().max().item() for g in base.values()) > 1e-3  # not vacuous


def test_an_engine_under_gradient_checkpointing_trains_without_the_shared_forward() -> None:
    """transformers drops a checkpointed layer's cache while training: the fsdp engine then
    runs the padded forward (and still shares in its no-grad log-prob pass)."""
    from rlctl.config.recipe import Recipe
    from rlctl.engines.train.contract import ModelEngineSpec
    from rlctl.engines.train.fsdp.engine import FSDPEngine

    recipe = Recipe.model_validate({
        "data": {"task": "count_digits"},
        "model": {"path": "tiny", "dtype": "float32", "gradient_checkpointing": True},
        "algorithm": {"optim": {"name": "sgd", "lr": 0.1}},
        "engines": {"train": {"ranks": 1, "micro_batch_size": 6, "log_prob_micro_batch_size": 6}},
    })
    engine = FSDPEngine(ModelEngineSpec.from_loaded(validate_recipe(recipe), "actor"))
    engine.init()
    mb = grouped_batch([2, 3, 1, 4, 2, 3])
    used: list[bool] = []
    real = engine._shares_prompts
    engine._shares_prompts = lambda model: used.append(real(model)) or used[-1]  # type: ignore[method-assign]
    engine.compute_log_prob(mb, temperature=1.0)
    fields = {"response_mask": mb.response_mask}
    metrics = engine.train_minibatch(
        mb, fields, lambda out, f: ((out["log_probs"] * f["response_mask"]).sum(), {}))
    assert used == [True, False]  # log-probs shared (no grad), the update not
    assert metrics["grad_norm"] > 0
