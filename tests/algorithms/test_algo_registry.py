"""Registrations: names, metadata, option models, docs entries, lazy imports, third-party lookup."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from rlctl.algorithms import get_advantage_estimator, get_policy_loss
from rlctl.algorithms.estimators import compute_grpo_advantage
from rlctl.registry import RegistryError, build_registry, reset_registry

DOCS = Path(__file__).resolve().parents[2] / "docs" / "algorithms.md"
ALLOWED_FIELDS = {"values", "reward_baselines", "old_log_probs", "ref_log_probs", "sum_pi_squared",
                  "reward_components"}
ISSUE_ESTIMATORS = {"gae", "grpo", "grpo_passk", "gdpo", "reinforce_plus_plus",
                    "reinforce_plus_plus_baseline", "remax", "rloo", "opo", "gpg",
                    "optimal_token_baseline", "tir_optimal_token_baseline", "dr_grpo"}
ISSUE_LOSSES = {"vanilla", "gspo", "cispo", "sapo", "clip_cov", "kl_cov", "gpg", "geo_mean"}


@pytest.fixture(scope="module")
def registry():
    reg = build_registry(external="none")
    mine = [
        f
        for f in reg.failures
        if f.source.startswith(("rlctl.plugins.estimators", "rlctl.plugins.policy_losses"))
    ]
    assert mine == []
    return reg


def test_every_name_of_the_issue_is_registered_and_loads(registry):
    assert set(registry.names("advantage_estimator")) == ISSUE_ESTIMATORS
    assert set(registry.names("policy_loss")) == ISSUE_LOSSES
    for kind in ("advantage_estimator", "policy_loss"):
        for reg in registry.all(kind):
            assert isinstance(reg.target, str), f"{reg.name} must be a lazy target"
            assert callable(reg.load())
            assert reg.description and reg.metadata.get("paper")


def test_estimator_metadata_declares_needed_fields(registry):
    for reg in registry.all("advantage_estimator"):
        assert isinstance(reg.metadata["requires"], frozenset)
        assert reg.metadata["requires"] <= ALLOWED_FIELDS, reg.name
        assert isinstance(reg.metadata["group_based"], bool)
    get = lambda name: registry.get("advantage_estimator", name).metadata
    assert get("gae")["requires"] == {"values"}
    assert get("remax")["requires"] == {"reward_baselines"}
    assert get("gdpo")["requires"] == {"reward_components"}
    assert get("optimal_token_baseline")["requires"] == {"old_log_probs", "sum_pi_squared"}
    assert get("grpo")["group_based"] and not get("gae")["group_based"]


def _option_models(registry):
    for kind in ("advantage_estimator", "policy_loss"):
        for reg in registry.all(kind):
            if reg.options is not None:
                yield reg, reg.options


def test_option_models_are_strict_documented_and_match_the_function_defaults(registry):
    models = list(_option_models(registry))
    assert {reg.name for reg, _ in models} >= {"gdpo", "gpg", "sapo", "clip_cov", "kl_cov",
                                               "optimal_token_baseline"}
    for reg, model in models:
        assert model.model_config["extra"] == "forbid" and model.model_config["frozen"]
        params = inspect.signature(reg.load()).parameters
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no docstring"
            assert name in params, f"{reg.name} does not accept option {name!r}"
            default = params[name].default
            assert field.default == (tuple(default) if isinstance(default, tuple) else default)
        with pytest.raises(ValueError, match="extra"):
            model(no_such_option=1)


def test_option_models_reject_inconsistent_values(registry):
    gdpo = registry.get("advantage_estimator", "gdpo").options
    with pytest.raises(ValueError, match="one weight per key"):
        gdpo(reward_keys=["a", "b"], reward_weights=[1.0])
    clip_cov = registry.get("policy_loss", "clip_cov").options
    with pytest.raises(ValueError, match="must be below"):
        clip_cov(clip_cov_lb=5.0, clip_cov_ub=1.0)


DOC_CHAPTERS = {"advantage_estimator": "Advantage estimators", "policy_loss": "Policy losses"}


def _doc_sections(kind: str) -> dict[str, str]:
    """``### `name` `` entries of the chapter of ``kind`` (a name may be in both: ``gpg``)."""
    chapters = re.split(r"^## (.+?)\s*$", DOCS.read_text(), flags=re.MULTILINE)
    chapter = chapters[chapters.index(DOC_CHAPTERS[kind]) + 1]
    parts = re.split(r"^### `([a-z_0-9]+)`\s*$", chapter, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


@pytest.mark.parametrize("kind", DOC_CHAPTERS)
def test_every_registered_name_has_a_docs_entry_with_formula_fields_and_paper(registry, kind):
    sections = _doc_sections(kind)
    assert set(sections) == set(registry.names(kind)), (
        "docs/algorithms.md and the registry disagree"
    )
    for name, body in sections.items():
        for label in ("**Formula:**", "**Fields:**", "**Paper:**"):
            assert label in body, f"docs entry {name!r} lacks {label}"
    for reg in registry.all(kind):
        for needed in reg.metadata.get("requires", ()):
            assert f"`{needed}`" in sections[reg.name], f"{reg.name}: docs omit {needed}"
        for option in (reg.options.model_fields if reg.options else {}):
            assert f"`{option}`" in sections[reg.name], f"{reg.name}: docs omit option {option}"


def test_importing_the_plugins_and_the_package_does_not_import_torch():
    code = (
        "import sys, rlctl.plugins.estimators, rlctl.plugins.policy_losses, rlctl.algorithms\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_lookup_by_name_and_unknown_names(monkeypatch):
    monkeypatch.setenv("RLCTL_PLUGINS", "none")
    reset_registry()
    try:
        assert get_advantage_estimator("grpo") is compute_grpo_advantage
        with pytest.raises(RegistryError, match="no advantage estimator named 'grpoo'.*grpo"):
            get_advantage_estimator("grpoo")
        with pytest.raises(RegistryError, match="no policy loss named"):
            get_policy_loss("ppo")
    finally:
        reset_registry()


def test_a_third_party_estimator_is_found_through_its_entry_point(tmp_path, monkeypatch):
    (tmp_path / "thirdparty_rlctl_math.py").write_text(textwrap.dedent("""
        from rlctl.hookspecs import hookimpl

        def halved_grpo(**kwargs):
            from rlctl.algorithms.estimators import compute_grpo_advantage
            adv, ret = compute_grpo_advantage(**kwargs)
            return adv / 2, ret / 2

        @hookimpl
        def register_advantage_estimators(register):
            register("halved_grpo", halved_grpo, description="GRPO at half scale",
                     requires=frozenset(), group_based=True)

        @hookimpl
        def register_policy_losses(register):
            register("vanilla_again", "rlctl.algorithms.policy_losses:compute_policy_loss_vanilla")
    """))
    dist = tmp_path / "thirdparty_rlctl_math-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: thirdparty-rlctl-math\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text("[rlctl]\nmath = thirdparty_rlctl_math\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("RLCTL_PLUGINS", "math")
    reset_registry()
    try:
        rewards = torch.tensor([[1.0], [0.0], [3.0]])
        mask = torch.ones(3, 1)
        halved, _ = get_advantage_estimator("halved_grpo")(
            token_level_rewards=rewards, response_mask=mask, index=["a", "a", "a"]
        )
        full, _ = compute_grpo_advantage(rewards, mask, ["a", "a", "a"])
        torch.testing.assert_close(halved, full / 2)
        assert callable(get_policy_loss("vanilla_again"))
    finally:
        reset_registry()
