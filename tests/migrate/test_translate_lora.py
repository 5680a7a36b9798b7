"""verl's LoRA keys -> ``[model.lora]``: mapped, no-effect ones dropped, what rlctl cannot
reproduce refused; the migrated recipe validates."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlctl.migrate.ledger import Ledger
from rlctl.migrate.rules import apply_rules
from rlctl.migrate.translate_lora import translate_lora
from rlctl.migrate.verl_config import Override, load_verl_config

MAIN = Path("tests/cli/migrate_fixtures/verl-main/_generated_ppo_trainer.yaml")
M = "actor_rollout_ref.model"


def _ledger(*overrides: str) -> Ledger:
    lg = Ledger(load_verl_config(MAIN, [Override(o, "test") for o in overrides]))
    translate_lora(lg)
    apply_rules(lg)
    return lg


def _fate(lg: Ledger, key: str) -> tuple[str, str]:
    entry = lg.entries[key]
    return entry.fate, entry.note


def test_fsdp_lora_maps_to_the_lora_section() -> None:
    lg = _ledger(f"{M}.lora_rank=32", f"{M}.lora_alpha=64", f"{M}.target_modules=[q_proj,v_proj]",
                 f"{M}.exclude_modules=[o_proj]", f"{M}.use_shm=true",
                 "actor_rollout_ref.rollout.layered_summon=true")
    assert lg.recipe["model"]["lora"] == {"rank": 32, "alpha": 64.0,
                                          "target_modules": ["q_proj", "v_proj"],
                                          "exclude_modules": ["o_proj"]}
    assert _fate(lg, f"{M}.lora_rank") == ("mapped", "model.lora.rank")
    assert _fate(lg, f"{M}.target_modules") == ("mapped", "model.lora.target_modules")
    assert _fate(lg, f"{M}.use_shm")[0] == "dropped"
    assert _fate(lg, "actor_rollout_ref.rollout.layered_summon")[0] == "dropped"
    assert not lg.problems


def test_all_linear_and_verls_defaults_validate() -> None:
    from rlctl.config.recipe import Recipe

    lg = _ledger(f"{M}.lora_rank=8")
    lora = lg.recipe["model"]["lora"]
    assert lora == {"rank": 8, "alpha": 16.0, "target_modules": "all-linear"}
    assert Recipe.model_validate({"model": {"lora": lora}}).model.lora.enabled


def test_lora_off_writes_no_section_and_drops_its_keys() -> None:
    lg = _ledger(f"{M}.lora_alpha=64")  # without a rank LoRA is off: the alpha does nothing
    assert "model" not in lg.recipe
    assert _fate(lg, f"{M}.lora_rank")[0] == "dropped"
    assert _fate(lg, f"{M}.lora_alpha")[0] == "dropped"
    assert not lg.problems


@pytest.mark.parametrize(("override", "key", "says"), [
    (f"{M}.lora_adapter_path=/ckpt/adapter", f"{M}.lora_adapter_path", "start from zero"),
    (f"{M}.target_modules=.*proj", f"{M}.target_modules", "regular expression"),
    (f"{M}.exclude_modules=.*mlp.*", f"{M}.exclude_modules", "regular expression"),
])
def test_what_rlctl_cannot_reproduce_is_refused(override: str, key: str, says: str) -> None:
    lg = _ledger(f"{M}.lora_rank=8", override)
    assert [p.key for p in lg.problems] == [key]
    assert says in lg.problems[0].message


@pytest.mark.parametrize("key", [f"{M}.lora.rank", "critic.model.lora_rank"])
def test_megatron_lora_and_a_lora_critic_are_refused(key: str) -> None:
    lg = _ledger(f"{key}=16")
    assert [p.key for p in lg.problems] == [key]


def test_a_verl_lora_script_migrates_to_a_recipe_that_validates(tmp_path) -> None:
    from rlctl.cli.app import build_app
    from tests.cli.cli_helpers import ROOT, invoke

    fix = ROOT / "tests/cli/migrate_fixtures/verl-b178a3cd"
    out = tmp_path / "lora.toml"
    invoke(build_app(), ["config", "migrate", str(fix / "ppo_trainer.yaml"), "--verl-script",
                         str(fix / "grpo_fsdp_qwen2-7b.sh"), "--var", "HOME=/data", "--reward",
                         "gsm8k", "--train-rows", "7473", "-o", str(out),
                         f"{M}.lora_rank=64", f"{M}.lora_alpha=32", f"{M}.use_shm=true",
                         "actor_rollout_ref.rollout.layered_summon=true"], 0)
    text = out.read_text()
    assert "[model.lora]\nrank = 64" in text and "alpha = 32.0" in text
    invoke(build_app(), ["config", "validate", str(out), "--skip-data"], 0)
