"""The JSON Schema covers the recipe and every plugin's option model, tied to its name."""

from __future__ import annotations

import tomllib

import pytest

from rlctl.config.schema import build_schema
from rlctl.registry import Registry
from tests.config.config_helpers import RECIPES

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def schema(registry: Registry) -> dict:
    return build_schema(registry)


@pytest.fixture(scope="module")
def validator(schema: dict):  # type: ignore[no-untyped-def]
    return jsonschema.Draft202012Validator(schema)


def test_schema_is_valid_draft_2020_12(schema: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_shipped_recipes_satisfy_the_schema(validator, path) -> None:  # type: ignore[no-untyped-def]
    validator.validate(tomllib.loads(path.read_text()))


@pytest.mark.parametrize(
    "recipe",
    [
        {"engines": {"train": {"backend": "fsdp", "options": {"mixed_precision": "fp8"}}}},
        {"engines": {"train": {"options": {"bogus": 1}}}},  # default backend fsdp applies
        {"rewards": [{"name": "gsm8k", "options": {"methd": "strict"}}]},
        {"algorithm": {"estimator": "grpo", "estimator_options": {"k": 1}}},  # no options
        {"algorithm": {"kl": {"in": "sometimes"}}},
        {"data_plane": {"backend": "redis"}},
        {"logging": {"sinks": ["console"], "sink_options": {"jsonl": {"flush_evry": 1}}}},
    ],
)
def test_schema_rejects_what_validation_rejects(validator, recipe: dict) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(recipe)


def test_every_option_model_is_in_the_schema(schema: dict, registry: Registry) -> None:
    text = str(schema)
    for kind in registry.kinds():
        for reg in registry.all(kind):
            if reg.options is not None and reg.options.model_fields:
                assert any(f in text for f in reg.options.model_fields), (kind, reg.name)
