"""The trained-parameter count ``config show`` prints, from shapes alone, equals PEFT's count
of the real module (tiny, tiny-chat, a checkpoint directory, one sharded into two files)."""

from __future__ import annotations

import json

import pytest

from rlctl.config.recipe import Recipe
from rlctl.models.loading import load_causal_lm
from rlctl.models.lora import add_adapters
from rlctl.models.param_count import ParamCount, trained_parameters

LORAS = [
    {"rank": 8},
    {"rank": 4, "target_modules": ["q_proj", "v_proj"]},
    {"rank": 4, "exclude_modules": ["down_proj"], "trainable_modules": ["lm_head"]},
    {"rank": 4, "trainable_modules": ["lm_head", "embed_tokens"]},
    {"rank": 2, "target_modules": ["self_attn.q_proj"],
     "exclude_modules": ["layers.1.self_attn.q_proj"], "trainable_modules": ["model.norm"]},
]


def _model(path: str, lora: dict | None = None):  # type: ignore[no-untyped-def]
    model = {"path": path, "dtype": "float32"}
    if lora is not None:
        model["lora"] = lora
    return Recipe.model_validate({"model": model}).model


def _peft_count(section) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(trained, total) of the real module: PEFT's adapters on the recipe's model."""
    lm = load_causal_lm(section.model_copy(update={"path": "tiny"}) if section.path != "tiny-chat"
                        else section, seed=0)
    total = sum(p.numel() for p in lm.parameters())
    if not section.lora.enabled:
        return total, total
    add_adapters(lm, section.lora, seed=0)
    return sum(p.numel() for p in lm.parameters() if p.requires_grad), total


@pytest.mark.parametrize("lora", LORAS, ids=lambda x: ",".join(sorted(x)))
@pytest.mark.parametrize("path", ["tiny", "tiny-chat"])
def test_count_equals_peft_on_the_tiny_models(path: str, lora: dict) -> None:
    section = _model(path, lora)
    count = trained_parameters(section)
    assert isinstance(count, ParamCount)
    assert (count.trainable, count.total) == _peft_count(section)


def test_full_fine_tuning_trains_everything() -> None:
    count = trained_parameters(_model("tiny"))
    assert isinstance(count, ParamCount)
    assert count.trainable == count.total == 76_160 and count.adapted == 0
    assert count.describe() == "76,160 of 76,160 parameters (100%)"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("ckpt")
    load_causal_lm(_model("tiny"), seed=0).save_pretrained(out)
    return out


@pytest.mark.parametrize("lora", LORAS[:4], ids=lambda x: ",".join(sorted(x)))
def test_count_from_safetensors_headers_equals_peft(checkpoint, lora: dict) -> None:
    count = trained_parameters(_model(str(checkpoint), lora))
    assert isinstance(count, ParamCount)
    assert (count.trainable, count.total) == _peft_count(_model("tiny", lora))


def test_a_sharded_checkpoint_is_counted_through_its_index(checkpoint, tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    state = load_file(checkpoint / "model.safetensors")
    names = sorted(state)
    half = len(names) // 2
    weight_map = {}
    for i, part in enumerate((names[:half], names[half:])):
        file = f"model-0000{i + 1}-of-00002.safetensors"
        save_file({n: state[n] for n in part}, str(tmp_path / file))
        weight_map |= {n: file for n in part}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (tmp_path / "config.json").write_bytes((checkpoint / "config.json").read_bytes())
    count = trained_parameters(_model(str(tmp_path), {"rank": 8}))
    assert isinstance(count, ParamCount)
    assert (count.trainable, count.total) == _peft_count(_model("tiny", {"rank": 8}))


def test_an_unreadable_directory_says_why_instead_of_counting(tmp_path) -> None:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 8 + b"x")  # a length past the limit
    said = trained_parameters(_model(str(tmp_path), {"rank": 8}))
    assert isinstance(said, str) and said.startswith("parameters not counted:")
    assert str(tmp_path) in said


def test_counting_reads_only_the_header(checkpoint, monkeypatch) -> None:
    """A safetensors file is read up to its header, never its tensors."""
    from rlctl import regular_file

    read: list[int | None] = []
    real = regular_file.read_bytes

    def spy(path, limit=None):  # type: ignore[no-untyped-def]
        if str(path).endswith(".safetensors"):
            read.append(limit)
        return real(path, limit)

    monkeypatch.setattr(regular_file, "read_bytes", spy)
    trained_parameters(_model(str(checkpoint), {"rank": 8}))
    size = (checkpoint / "model.safetensors").stat().st_size
    assert read and all(n is not None and n < size / 10 for n in read)
