"""LoRA through PEFT: the adapted module starts as the base, adapters off is the base, the
merged state equals PEFT's merge, the adapter state is PEFT's saved format (and loads back)."""

from __future__ import annotations

import copy

import pytest
import torch
from peft import PeftModel, get_peft_model_state_dict

from rlctl.config.recipe import Recipe
from rlctl.models.loading import load_causal_lm
from rlctl.models.lora import (
    AdapterWeights,
    adapter_state,
    adapters_from_config,
    adapters_off,
    add_adapters,
    config_dict,
    load_adapter_state,
    merged_state,
)

PROMPT = torch.tensor([[1, 5, 6, 7, 14, 9, 9]])


def _model(lora: dict):  # type: ignore[no-untyped-def]
    return Recipe.model_validate({"model": {"dtype": "float32", "lora": lora}}).model


def _trained(lora: dict, seed: int = 0):  # type: ignore[no-untyped-def]
    """The tiny model with adapters whose B (and fully trained modules) moved off zero."""
    section = _model(lora)
    lm = load_causal_lm(section, seed=0)
    peft = add_adapters(lm, section.lora, seed=0)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in lm.named_parameters():
            if p.requires_grad:
                p.add_(torch.randn(p.shape, generator=gen) * 0.2)
    return section, lm, peft


def _logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(PROMPT).logits


def test_adapters_start_at_zero_and_only_they_train() -> None:
    section = _model({"rank": 4})
    base = _logits(load_causal_lm(section, seed=0))
    lm = load_causal_lm(section, seed=0)
    add_adapters(lm, section.lora, seed=0)
    torch.testing.assert_close(_logits(lm), base, rtol=0, atol=0)
    trained = [n for n, p in lm.named_parameters() if p.requires_grad]
    assert trained and all(".lora_A." in n or ".lora_B." in n for n in trained)


def test_the_same_seed_draws_the_same_adapters() -> None:
    a, b = (add_adapters(load_causal_lm(_model({"rank": 4}), seed=0), _model({"rank": 4}).lora,
                         seed=7) for _ in range(2))
    for (name, x), (_, y) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.equal(x, y), name


def test_adapters_off_is_the_base_model() -> None:
    section, lm, peft = _trained({"rank": 4})
    base = _logits(load_causal_lm(section, seed=0))
    assert (_logits(lm) - base).abs().max() > 1e-2  # the adapters do something
    with adapters_off(peft):
        torch.testing.assert_close(_logits(lm), base, rtol=0, atol=0)
    assert (_logits(lm) - base).abs().max() > 1e-2  # and are back afterwards


@pytest.mark.parametrize("lora", [{"rank": 4, "alpha": 8.0},
                                  {"rank": 2, "trainable_modules": ["lm_head"]}],
                         ids=["adapters", "with-a-trained-tied-head"])
def test_merged_state_equals_peft_merge_and_the_adapted_forward(lora: dict) -> None:
    section, lm, peft = _trained(lora)
    merged = merged_state(lm.state_dict(), section.lora.alpha / section.lora.rank)
    by_peft = copy.deepcopy(peft).merge_and_unload().state_dict()
    assert set(merged) == set(by_peft)
    for name, value in merged.items():
        torch.testing.assert_close(value, by_peft[name], rtol=0, atol=1e-6)
    plain = load_causal_lm(section, seed=0)
    plain.load_state_dict(merged)
    torch.testing.assert_close(_logits(plain), _logits(lm), rtol=0, atol=1e-5)


@pytest.mark.parametrize("lora", [{"rank": 4, "target_modules": ["q_proj", "v_proj"]},
                                  {"rank": 1, "trainable_modules": ["embed_tokens"]}],
                         ids=["adapters", "with-trained-tied-embeddings"])
def test_adapter_state_is_peft_format_and_loads_back(tmp_path, lora: dict) -> None:
    section, lm, peft = _trained(lora)
    # what an engine gathers: each trained parameter once (tied ones under one name)
    tensors = adapter_state(peft, {n: p.detach() for n, p in lm.named_parameters()
                                   if p.requires_grad})
    want = get_peft_model_state_dict(peft)
    assert set(tensors) == set(want) and all(k.startswith("base_model.model.") for k in tensors)
    for name, value in tensors.items():
        assert torch.equal(value, want[name])
    adapter = AdapterWeights(tensors, config_dict(peft))
    trained = sum(p.numel() for p in lm.parameters() if p.requires_grad)  # a tied copy once
    assert adapter.nbytes == 4 * trained
    directory = adapter.save(tmp_path / "adapter")
    loaded = PeftModel.from_pretrained(load_causal_lm(section, seed=0), str(directory))
    torch.testing.assert_close(_logits(loaded), _logits(lm), rtol=0, atol=1e-6)
    # what a rollout engine does with a sync: adapters from the config, then the tensors
    other = load_causal_lm(section, seed=0)
    load_adapter_state(adapters_from_config(other, adapter.config), adapter.tensors)
    torch.testing.assert_close(_logits(other), _logits(lm), rtol=0, atol=0)


def test_an_adapter_of_another_shape_is_refused() -> None:
    _, lm, peft = _trained({"rank": 4})
    other = load_causal_lm(_model({"rank": 4}), seed=0)
    target = adapters_from_config(other, config_dict(peft))
    tensors = adapter_state(peft, lm.state_dict())
    tensors.pop(next(iter(tensors)))
    with pytest.raises(ValueError, match="missing"):
        load_adapter_state(target, tensors)
