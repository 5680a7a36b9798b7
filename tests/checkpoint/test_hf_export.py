"""export_hf: a tiny Qwen3 state dict comes back through AutoModelForCausalLM.from_pretrained."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from rlctl.checkpoint import ExportError, export_hf

VOCAB = ["<pad>", "<bos>", "<eos>", "<unk>", *"0123456789=+"]


def tiny_config(*, tied: bool = True) -> Qwen3Config:
    return Qwen3Config(
        vocab_size=len(VOCAB),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=32,
        tie_word_embeddings=tied,
    )


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(VOCAB)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
    )


def tiny_model(config: Qwen3Config, seed: int = 0) -> Qwen3ForCausalLM:
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config).eval()


@pytest.mark.parametrize("tied", [True, False])
def test_export_round_trip(tmp_path: Path, tied: bool) -> None:
    config = tiny_config(tied=tied)
    model = tiny_model(config)
    out = export_hf(model.state_dict(), config, tiny_tokenizer(), tmp_path / "hf")
    assert out == tmp_path / "hf"
    assert (out / "config.json").is_file() and list(out.glob("*.safetensors"))
    loaded = AutoModelForCausalLM.from_pretrained(out).eval()
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    ids = torch.randint(0, len(VOCAB), (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.convert_ids_to_tokens(tokenizer("12=3")["input_ids"]) == ["1", "2", "=", "3"]
    assert not (tmp_path / "hf.partial").exists()


def test_tied_embeddings_may_come_under_one_name(tmp_path: Path) -> None:
    config = tiny_config(tied=True)
    model = tiny_model(config)
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    loaded = AutoModelForCausalLM.from_pretrained(export_hf(state, config, None, tmp_path / "hf"))
    assert torch.equal(loaded.lm_head.weight, model.model.embed_tokens.weight)


def test_export_casts_and_replaces_an_older_export(tmp_path: Path) -> None:
    config = tiny_config()
    export_hf(tiny_model(config, seed=0).state_dict(), config, None, tmp_path / "hf")
    newer = tiny_model(config, seed=1)
    export_hf(newer.state_dict(), config, None, tmp_path / "hf", dtype=torch.bfloat16)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype="auto")
    assert loaded.model.embed_tokens.weight.dtype == torch.bfloat16
    assert torch.equal(
        loaded.model.embed_tokens.weight, newer.model.embed_tokens.weight.to(torch.bfloat16)
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]


def test_a_state_dict_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    config = tiny_config()
    state = tiny_model(config).state_dict()
    renamed = {f"module.{k}": v for k, v in state.items()}
    with pytest.raises(ExportError, match=r"missing \[.*\] \(\d+\), unexpected \[module\."):
        export_hf(renamed, config, None, tmp_path / "hf")
    with pytest.raises(ExportError, match="not a tensor"):
        export_hf({**state, "x": 1.0}, config, None, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()
