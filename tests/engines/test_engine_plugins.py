"""The engine, weight-sync, task and reward registrations."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from rlctl.registry import build_registry


@pytest.fixture(scope="module")
def registry():
    return build_registry(external="none")


def test_registration_does_not_import_heavy_modules():
    code = (
        "import sys; from rlctl.registry import build_registry; build_registry(external='none');"
        "print(sorted(m for m in ('torch', 'transformers', 'ray') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_fsdp_and_hf_load(registry):
    from rlctl.engines.rollout.hf.engine import HFRolloutEngine
    from rlctl.engines.rollout.weight_sync import InProcessWeightSync
    from rlctl.engines.train.fsdp.engine import FSDPEngine

    assert registry.load("model_engine", "fsdp") is FSDPEngine
    assert registry.load("rollout_engine", "hf") is HFRolloutEngine
    assert registry.get("rollout_engine", "hf").metadata["weight_sync"] == "in_process"
    assert registry.load("weight_sync", "in_process") is InProcessWeightSync
    assert registry.get("weight_sync", "in_process").metadata["engines"] == ("hf",)


@pytest.mark.parametrize(
    ("kind", "name", "target"),
    [
        ("model_engine", "megatron", "rlctl.engines.train.megatron.engine:MegatronEngine"),
        ("rollout_engine", "vllm", "rlctl.engines.rollout.vllm.engine:VLLMRolloutEngine"),
        ("rollout_engine", "sglang", "rlctl.engines.rollout.sglang.engine:SGLangRolloutEngine"),
    ],
)
def test_server_and_megatron_engines_are_registered_lazily(registry, kind, name, target):
    # Lazy "module:attr" targets: selecting them in a recipe imports nothing heavy.
    assert registry.get(kind, name).target == target


@pytest.mark.parametrize(
    "kind",
    ["model_engine", "rollout_engine", "weight_sync", "task", "reward_function"],
)
def test_option_models_are_strict_and_documented(registry, kind):
    for reg in registry.all(kind):
        if reg.plugin.builtin and reg.options is not None:
            with pytest.raises(ValidationError):
                reg.options.model_validate({"no_such_option": 1})
            for field_name, info in reg.options.model_fields.items():
                assert info.description, f"{kind} {reg.name}: option {field_name} has no docstring"
