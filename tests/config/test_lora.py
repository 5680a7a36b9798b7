"""``[model.lora]`` and ``[engines.rollout] lora_sync``: what the section accepts, what the
checks refuse (with the reason and the fix), what the plan and ``config show`` say."""

from __future__ import annotations

import pytest

from rlctl.config.pipeline import load_recipe
from rlctl.config.problems import ConfigError
from rlctl.hookspecs import hookimpl
from rlctl.registry import build_registry

BASE = 'run.device = "cpu"\n[data]\ntask = "count_digits"\n'
LORA = BASE + "[model.lora]\nrank = 8\n"


def test_full_fine_tuning_is_the_default(load) -> None:  # type: ignore[no-untyped-def]
    loaded = load(BASE)
    assert not loaded.recipe.model.lora.enabled
    assert loaded.recipe.engines.rollout.lora_sync == "adapter"


def test_a_lora_section_loads_with_peft_s_defaults(load) -> None:  # type: ignore[no-untyped-def]
    lora = load(LORA).recipe.model.lora
    assert (lora.rank, lora.alpha, lora.dropout, lora.target_modules) == (
        8, 16.0, 0.0, "all-linear")


@pytest.mark.parametrize(("text", "path", "says"), [
    ("[model.lora]\nalpha = 32.0\n", "model.lora.alpha", "rank = 0 (LoRA off"),
    ("[model.lora]\nrank = 8\ntarget_modules = \"q_proj\"\n", "model.lora.target_modules",
     'write target_modules = ["q_proj"]'),
    ("[model.lora]\nrank = 8\ntarget_modules = [\"q.*\"]\n", "model.lora.target_modules[0]",
     "no wildcards"),
    ("[model.lora]\nrank = 8\ndropout = 1.0\n", "model.lora.dropout", "< 1"),
    ("[engines.rollout]\nlora_sync = \"merged\"\n", "engines.rollout.lora_sync",
     "[model.lora] rank = 0"),
])
def test_bad_lora_settings_name_the_key_and_the_fix(problems, text: str, path: str,
                                                     says: str) -> None:  # type: ignore[no-untyped-def]
    (p,) = problems(BASE + text)
    assert p.path == path
    assert says in f"{p.message} {p.fix}"


def test_the_megatron_engine_refuses_lora_with_the_reason(problems) -> None:  # type: ignore[no-untyped-def]
    (p,) = problems(LORA + '[engines.train]\nbackend = "megatron"\n')
    assert p.path == "model.lora.rank"
    assert "'megatron' training engine has no LoRA path" in p.message
    assert "fsdp" in p.fix


def test_sglang_on_cpu_loads_no_adapters_merged_is_the_fix(problems, load) -> None:  # type: ignore[no-untyped-def]
    sglang = LORA + '[engines.rollout]\nbackend = "sglang"\n'
    (p,) = problems(sglang)
    assert p.path == "engines.rollout.lora_sync"
    assert "pin_memory" in p.message and 'lora_sync = "merged"' in p.fix
    assert load(sglang + 'lora_sync = "merged"\n').recipe.engines.rollout.lora_sync == "merged"


def test_sglang_refuses_adapters_when_it_starts_on_a_machine_without_cuda(load) -> None:  # type: ignore[no-untyped-def]
    """run.device = "auto" cannot be told at validate: the engine says the same at start."""
    from rlctl.engines.rollout.contract import RolloutEngineSpec
    from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine

    loaded = load(LORA.replace('"cpu"', '"auto"') + '[engines.rollout]\nbackend = "sglang"\n')
    with pytest.raises(ValueError, match="cannot load LoRA adapters"):
        SGLangRolloutEngine(RolloutEngineSpec.from_loaded(loaded, device="cpu"))


@pytest.mark.parametrize(("backend", "text", "path"), [
    ("vllm", "trainable_modules = [\"lm_head\"]\n", "engines.rollout.lora_sync"),
    ("vllm", "rank = 1000\n", "model.lora.rank"),
])
def test_what_vllm_cannot_load_is_refused(problems, backend: str, text: str, path: str) -> None:  # type: ignore[no-untyped-def]
    recipe = (BASE + "[model.lora]\n" + ("rank = 8\n" if "rank" not in text else "") + text
              + f'[engines.rollout]\nbackend = "{backend}"\n')
    (p,) = problems(recipe)
    assert p.path == path


def test_the_hf_engine_takes_fully_trained_modules_with_its_adapters(load) -> None:  # type: ignore[no-untyped-def]
    loaded = load(LORA + 'trainable_modules = ["embed_tokens"]\n')
    assert loaded.recipe.model.lora.trainable_modules == ["embed_tokens"]


class _FullWeightsOnly:
    @hookimpl
    def register_weight_syncs(self, register) -> None:  # type: ignore[no-untyped-def]
        register("copy", "rlctl.engines.rollout.weight_sync:InProcessWeightSync",
                 engines=("hf",), description="a third-party sync without adapters")


def test_a_sync_without_adapter_support_needs_merged_weights(write) -> None:  # type: ignore[no-untyped-def]
    registry = build_registry(external="none", extra=[_FullWeightsOnly()])
    text = LORA + '[engines.rollout]\nweight_sync = "copy"\n'
    with pytest.raises(ConfigError) as err:
        load_recipe([write(text)], env={}, registry=registry)
    (p,) = err.value.problems
    assert p.path == "engines.rollout.lora_sync" and "'copy' weight sync" in p.message
    merged = load_recipe([write(text + 'lora_sync = "merged"\n')], env={}, registry=registry)
    assert merged.recipe.engines.rollout.lora_sync == "merged"


def test_specs_carry_the_lora_section(load) -> None:  # type: ignore[no-untyped-def]
    from rlctl.engines.rollout.contract import RolloutEngineSpec
    from rlctl.engines.train.contract import ModelEngineSpec

    loaded = load(LORA + "[algorithm.kl]\nin = \"loss\"\n[critic]\nenabled = true\n")
    lora = loaded.recipe.model.lora
    assert ModelEngineSpec.from_loaded(loaded, "actor").lora == lora
    assert ModelEngineSpec.from_loaded(loaded, "ref").lora is None
    assert ModelEngineSpec.from_loaded(loaded, "critic").lora is None
    assert RolloutEngineSpec.from_loaded(loaded).lora_adapters == lora
    merged = load(LORA + '[engines.rollout]\nlora_sync = "merged"\n')
    assert RolloutEngineSpec.from_loaded(merged).lora_adapters is None


def test_the_plan_takes_the_reference_from_the_actors_module(load) -> None:  # type: ignore[no-untyped-def]
    from rlctl.trainer.plan import lora_note, plan_of

    full = plan_of(load(BASE + "[algorithm.kl]\nin = \"loss\"\n"))
    assert full.roles == ("actor", "ref") and full.reference.value == "ref"
    assert (full.trained.value, full.weights.value) == ("all weights", "full")
    assert lora_note(full) is None
    plan = plan_of(load(LORA + "[algorithm.kl]\nin = \"loss\"\n"))
    assert plan.roles == ("actor",) and plan.reference.value == "base"
    assert plan.weights.value == "adapter" and plan.trained.value == "lora"
    assert "16,384 of 76,160 parameters (21.5%)" in plan.trained.why
    note = lora_note(plan)
    assert note is not None and "base model" in note and "adapters only" in note
    off = plan_of(load(LORA))
    assert off.reference.value == "none" and not off.has_reference


def test_config_show_prints_the_trainable_count_and_validate_explains(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rlctl.cli.app import build_app
    from tests.cli.cli_helpers import invoke

    path = tmp_path / "lora.toml"
    path.write_text(LORA + "[algorithm.kl]\nin = \"loss\"\n")
    shown = invoke(build_app(), ["config", "show", str(path)], 0).stdout
    assert "#   trained = lora  ([model.lora] rank 8, alpha 16 on 14 modules: 16,384 of " \
           "76,160 parameters (21.5%) train, the rest stays frozen)" in shown
    assert "#   reference = base  (the actor's module with its LoRA adapters off" in shown
    assert "[model.lora]\nrank = 8\n" in shown
    checked = invoke(build_app(), ["config", "validate", str(path)], 0)
    assert "note: LoRA: [model.lora] rank 8" in checked.stderr
