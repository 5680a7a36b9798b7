"""The rollout worker's weight sync: built from one recipe table, the same options for the engine.

Recipes go through ``validate_recipe`` (what loading does): the options are validated once,
there, and the worker hands that object to the sync and to the engine.
"""

from __future__ import annotations

import pytest

from rlctl.config.pipeline import validate_recipe
from rlctl.config.problems import ConfigError
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.sglang.options import SGLangWeightSyncOptions
from rlctl.engines.rollout.sglang.weight_sync import SGLangWeightSync
from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine
from rlctl.engines.rollout.vllm.options import VLLMWeightSyncOptions
from rlctl.engines.rollout.vllm.weight_sync import VLLMWeightSync
from rlctl.engines.rollout.weight_sync import InProcessOptions, InProcessWeightSync
from rlctl.registry import get_registry
from rlctl.testing.server_checkpoint import SERVER_TINY_SHAPE
from rlctl.trainer.worker.rollout_worker import make_weight_sync


def recipe(backend: str, sync: str | None = None, **options: object) -> Recipe:
    rollout = {"backend": backend, "weight_sync_options": options}
    if sync is not None:
        rollout["weight_sync"] = sync
    return Recipe.model_validate({"model": {"path": "tiny", "tiny": SERVER_TINY_SHAPE},
                                  "data": {"task": "count_digits"},
                                  "engines": {"rollout": rollout}})


def test_the_engines_default_sync_gets_the_recipes_table():
    loaded = validate_recipe(recipe("vllm", method="reload", bucket_mb=2))
    sync = make_weight_sync(loaded, get_registry())
    options = loaded.options_for("engines.rollout.weight_sync_options")  # validated once
    assert isinstance(sync, VLLMWeightSync) and sync.options is options
    assert options == VLLMWeightSyncOptions(method="reload", bucket_mb=2)
    # the engine built with the same options starts its servers for that sync: no transfer
    # engine for reload, so no --weight-transfer-config
    spec = RolloutEngineSpec.from_loaded(loaded)
    assert spec.weight_sync_options is options
    engine = VLLMRolloutEngine(spec)
    assert engine.transfer_backend is None
    assert "--weight-transfer-config" not in engine.server_command(0, "/m").argv


def test_a_named_sync_is_validated_by_its_own_model():
    loaded = validate_recipe(recipe("sglang", sync="sglang", transport="disk"))
    sync = make_weight_sync(loaded, get_registry())
    assert isinstance(sync, SGLangWeightSync)
    assert sync.options == SGLangWeightSyncOptions(transport="disk")


def test_the_hf_engine_defaults_to_in_process_whose_options_are_empty():
    sync = make_weight_sync(validate_recipe(recipe("hf")), get_registry())
    assert isinstance(sync, InProcessWeightSync) and sync.options == InProcessOptions()


def test_an_options_table_the_sync_does_not_know_is_refused_at_load():
    with pytest.raises(ConfigError, match="engines.rollout.weight_sync_options.transport"):
        validate_recipe(recipe("vllm", transport="pigeon"))
