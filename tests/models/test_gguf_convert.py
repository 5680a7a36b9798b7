"""GGUF -> HF checkpoint: the converted directory's logits equal transformers' own GGUF load.

On a tiny Llama GGUF written here with the ``gguf`` package (Q8_0 weights, so the
de-quantization is exercised); the real SmolLM2 file is checked the same way at install time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("gguf", reason='pip install "rlctl[real]"')
pytest.importorskip("accelerate", reason='pip install "rlctl[real]"')

from rlctl.models.gguf_convert import (
    CHECK_PROMPTS,
    chat_prompt_ids,
    convert_gguf,
    load_gguf,
    max_logit_difference,
)
from tests.models.tiny_gguf import write_tiny_gguf


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("gguf")
    gguf_file = write_tiny_gguf(root / "tiny.gguf")
    return gguf_file, convert_gguf(gguf_file, root / "hf")


def test_the_checkpoint_gives_the_gguf_loads_logits_exactly(converted) -> None:  # type: ignore[no-untyped-def]
    gguf_file, hf_dir = converted
    assert max_logit_difference(gguf_file, hf_dir, CHECK_PROMPTS) == 0.0


def test_the_checkpoint_is_a_plain_hf_directory_with_the_chat_tokenizer(converted) -> None:  # type: ignore[no-untyped-def]
    from rlctl.config.recipe import ModelSection
    from rlctl.models.loading import load_causal_lm, load_tokenizer

    _, hf_dir = converted
    config = json.loads((hf_dir / "config.json").read_text())
    assert "quantization_config" not in config  # loads like any checkpoint, no GGUF marker
    assert config["architectures"] == ["LlamaForCausalLM"] and config["dtype"] == "float32"
    assert (hf_dir / "model.safetensors").is_file()
    section = ModelSection(path=str(hf_dir), dtype="float32")
    tok = load_tokenizer(section)
    assert tok.eos_token == "<|im_end|>" and tok.padding_side == "left"
    ids = chat_prompt_ids(tok, "What is 2 + 3?")
    assert tok.decode(ids) == "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
    lm = load_causal_lm(section, seed=0)
    assert sum(p.numel() for p in lm.parameters()) > 0 and lm.config.tie_word_embeddings


def test_the_de_quantized_weights_are_the_gguf_loads(converted) -> None:  # type: ignore[no-untyped-def]
    import torch
    from safetensors.torch import load_file

    gguf_file, hf_dir = converted
    gguf_model, _ = load_gguf(gguf_file)
    saved = load_file(str(hf_dir / "model.safetensors"))
    for name, tensor in gguf_model.state_dict().items():
        if name in saved:  # the tied lm_head is stored once, as the embedding
            assert torch.equal(saved[name], tensor), name


def test_an_existing_output_directory_is_never_written_into(converted, tmp_path) -> None:  # type: ignore[no-untyped-def]
    gguf_file, _ = converted
    (tmp_path / "mine.txt").write_text("keep")
    with pytest.raises(FileExistsError):
        convert_gguf(gguf_file, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]
