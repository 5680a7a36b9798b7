"""How many parameters a recipe trains, from tensor shapes alone (no torch, no weights read).

``rlctl config validate`` and ``config show`` print it, and they import no torch: the shapes
come from the tiny model's section (``model.path = "tiny"``) or from the headers of a
checkpoint's safetensors files (a JSON table of names, dtypes and shapes at the start of each
file). With ``[model.lora]`` the count is what PEFT trains: ``rank * (in + out)`` per linear
module that gets an adapter (``[out, in]`` weights), plus every parameter of the
``trainable_modules``. Module names match as PEFT matches them: a name matches a module whose
path is the name or ends with ``.name``; ``all-linear`` is every 2-D weight but the
embeddings and the output head (PEFT's own count of the engine's module is the same: tested).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rlctl import regular_file

if TYPE_CHECKING:
    from rlctl.config.lora import LoRASection
    from rlctl.config.recipe import ModelSection, TinyModelSection

SAFETENSORS_INDEX = "model.safetensors.index.json"
MAX_HEADER_BYTES = 100 * 2**20
"""A safetensors header larger than this is not one (the format caps it at 100 MB)."""


class ShapesUnknown(ValueError):
    """The shapes of a model's weights cannot be read without loading it."""


@dataclass(frozen=True)
class WeightShapes:
    """Every parameter of a causal LM by its HF name, with its shape."""

    shapes: dict[str, tuple[int, ...]]
    vocab_size: int
    tied: frozenset[str] = frozenset()
    """Names that share another parameter's storage (a tied output head): they match module
    names, but are not counted twice."""

    @property
    def total(self) -> int:
        return sum(_numel(s) for n, s in self.shapes.items() if n not in self.tied)


@dataclass(frozen=True)
class ParamCount:
    """What a run trains."""

    trainable: int
    """Parameters with gradients and optimizer state."""
    total: int
    """Parameters of the policy model (without adapters)."""
    adapted: int = 0
    """Modules that get LoRA adapters (0: full fine-tuning)."""

    def describe(self) -> str:
        share = 100 * self.trainable / max(self.total, 1)
        return f"{self.trainable:,} of {self.total:,} parameters ({share:.3g}%)"


def trained_parameters(model: ModelSection) -> ParamCount | str:
    """What ``model`` (with its ``[model.lora]``) trains, or why that cannot be told here."""
    try:
        shapes = weight_shapes(model)
    except ShapesUnknown as exc:
        return str(exc)
    return count_trained(shapes, model.lora)


def count_trained(shapes: WeightShapes, lora: LoRASection) -> ParamCount:
    """The parameters ``lora`` trains on a model of ``shapes`` (all of them when it is off)."""
    if not lora.enabled:
        return ParamCount(shapes.total, shapes.total)
    adapted = adapted_modules(shapes, lora)
    adapters = sum(lora.rank * sum(shapes.shapes[m + ".weight"]) for m in adapted)
    whole = [name for name in shapes.shapes
             if _matches(name.rsplit(".", 1)[0], lora.trainable_modules)]
    if any("embed_tokens" in n for n in whole):  # a tied head trains with its embeddings:
        whole = [n for n in whole if n not in shapes.tied]  # one tensor, counted once
    full = sum(_numel(shapes.shapes[name]) for name in whole)
    return ParamCount(adapters + full, shapes.total, len(adapted))


def adapted_modules(shapes: WeightShapes, lora: LoRASection) -> list[str]:
    """Paths of the modules that get adapters."""
    linear = [name[: -len(".weight")] for name, shape in shapes.shapes.items()
              if name.endswith(".weight") and len(shape) == 2
              and not _embedding_or_head(name)]
    targets = lora.target_modules
    chosen = linear if isinstance(targets, str) else [m for m in linear if _matches(m, targets)]
    return [m for m in chosen if not _matches(m, lora.exclude_modules)
            and not _matches(m, lora.trainable_modules)]


def weight_shapes(model: ModelSection) -> WeightShapes:
    """The shapes of ``model``'s weights: the tiny model's from its section, a directory's from
    its safetensors headers. :class:`ShapesUnknown` otherwise."""
    from rlctl.models.tiny import TINY_VOCAB
    from rlctl.models.tiny_chat import CHAT_VOCAB, TINY_CHAT

    if model.path in ("tiny", TINY_CHAT):
        vocab = len(CHAT_VOCAB if model.path == TINY_CHAT else TINY_VOCAB)
        return tiny_shapes(model.tiny, vocab)
    return directory_shapes(Path(model.path))


def tiny_shapes(tiny: TinyModelSection, vocab: int) -> WeightShapes:
    """The tiny Qwen3's parameters (tied embeddings), as ``Qwen3ForCausalLM`` names them."""
    h, i, d = tiny.hidden_size, tiny.intermediate_size, tiny.head_dim
    q, kv = tiny.num_attention_heads * d, tiny.num_key_value_heads * d
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, h)}
    for layer in range(tiny.num_hidden_layers):
        p = f"model.layers.{layer}."
        shapes |= {
            p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
            p + "self_attn.q_norm.weight": (d,), p + "self_attn.k_norm.weight": (d,),
            p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h),
            p + "mlp.down_proj.weight": (h, i),
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
        }
    shapes |= {"model.norm.weight": (h,), "lm_head.weight": (vocab, h)}
    return WeightShapes(shapes, vocab, tied=frozenset({"lm_head.weight"}))


def directory_shapes(path: Path) -> WeightShapes:
    """Shapes from the safetensors files of an HF model directory (one file, or the files its
    index names); the head counts once when ``config.json`` ties it to the embeddings."""
    try:
        config = json.loads(regular_file.read_text(path / "config.json"))
        config = config.get("text_config", config)
        files = ([path / "model.safetensors"] if (path / "model.safetensors").exists() else
                 sorted({path / f for f in json.loads(regular_file.read_text(
                     path / SAFETENSORS_INDEX))["weight_map"].values()}))
        shapes: dict[str, tuple[int, ...]] = {}
        for file in files:
            shapes |= safetensors_shapes(file)
        vocab = int(config["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ShapesUnknown(f"parameters not counted: the shapes of {path}'s weights cannot "
                            f"be read here ({type(exc).__name__}: {exc})") from None
    tied: set[str] = set()
    if config.get("tie_word_embeddings", False):
        embed = next((n for n in shapes if n.endswith("embed_tokens.weight")), None)
        if embed is not None:
            shapes["lm_head.weight"] = shapes[embed]
            tied.add("lm_head.weight")
    return WeightShapes(shapes, vocab, frozenset(tied))


def safetensors_shapes(file: Path) -> dict[str, tuple[int, ...]]:
    """``name -> shape`` from a safetensors file's header (8 bytes of length, then JSON)."""
    head = regular_file.read_bytes(file, limit=8)
    (size,) = struct.unpack("<Q", head) if len(head) == 8 else (-1,)
    if not 0 < size <= MAX_HEADER_BYTES:
        raise ValueError(f"{file} is not a safetensors file")
    header = json.loads(regular_file.read_bytes(file, limit=8 + size)[8:])
    return {name: tuple(int(n) for n in entry["shape"])
            for name, entry in header.items() if name != "__metadata__"}


def _matches(module: str, names: Iterable[str]) -> bool:
    return any(module == n or module.endswith("." + n) for n in names)


def _embedding_or_head(name: str) -> bool:
    """HF's names of the token / position embeddings and of a causal LM's output head."""
    leaf = name.rsplit(".", 2)[-2]
    return "embed" in leaf or leaf in ("lm_head", "wte", "wpe")


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
