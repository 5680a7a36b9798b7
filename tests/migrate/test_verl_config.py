"""verl's config as main_ppo sees it: Hydra's override rules, config-group choices, and which
leaves are verl's defaults, the user's settings, or switched off."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlctl.migrate.verl_config import Override, VerlConfigError, load_verl_config

MAIN = Path("tests/cli/migrate_fixtures/verl-main/_generated_ppo_trainer.yaml")
A = "actor_rollout_ref.actor"


def _load(*overrides: str, path: Path = MAIN, **kw):  # type: ignore[no-untyped-def]
    return load_verl_config(path, [Override(o, "test") for o in overrides], **kw)


def test_a_value_at_verls_default_is_not_the_users_setting() -> None:
    cfg = _load(f"{A}.ppo_mini_batch_size=256", f"{A}.ppo_epochs=2", "trainer.nnodes=1.0")
    assert cfg.is_default(f"{A}.ppo_mini_batch_size")  # set, but to verl's default
    assert cfg.is_default("trainer.nnodes")  # 1.0 is verl's 1
    assert cfg.changed(f"{A}.ppo_epochs") and f"{A}.ppo_epochs" in cfg.touched
    # critic.ppo_epochs follows the actor's through verl's interpolation: still its default
    assert cfg.get("critic.ppo_epochs") == 2 and cfg.is_default("critic.ppo_epochs")
    fixed = _load(f"{A}.ppo_epochs=2", "critic.ppo_epochs=1")
    assert fixed.changed("critic.ppo_epochs")  # 1 was the default's value, not its rule


def test_a_table_switched_off_is_off_as_a_whole() -> None:
    cfg = _load(f"{A}.fsdp_config.qat.group_size=64")
    qat = f"{A}.fsdp_config.qat"
    assert cfg.off_switch(f"{qat}.group_size") == f"{qat}.enable"
    assert cfg.off_switch(f"{qat}.enable") is None
    assert _load(f"{qat}.enable=true").off_switch(f"{qat}.group_size") is None


@pytest.mark.parametrize(("override", "key", "value"), [
    ("+trainer.brand_new=3", "trainer.brand_new", 3),
    ("++data.train_batch_size=8", "data.train_batch_size", 8),
    ("++trainer.other_new=[1,2]", "trainer.other_new", [1, 2]),
    ("trainer.logger=[console,tensorboard]", "trainer.logger", ["console", "tensorboard"]),
    ("+actor_rollout_ref.rollout.engine_kwargs.vllm={swap_space:4,seed:1}",
     "actor_rollout_ref.rollout.engine_kwargs.vllm.swap_space", 4),
    # Hydra's + adds where the value is null too (verl's examples rely on it)
    ("+actor_rollout_ref.model.external_lib=mylib", "actor_rollout_ref.model.external_lib",
     "mylib"),
])
def test_hydra_overrides_as_verl_scripts_write_them(override: str, key: str, value) -> None:  # type: ignore[no-untyped-def]
    cfg = _load(override)
    assert cfg.get(key) == value and key in cfg.touched


def test_deleting_a_key() -> None:
    for absent in ("~trainer.no_such_key", "~trainer.rollout_data_dir"):  # null: Hydra neither
        with pytest.raises(VerlConfigError, match="cannot delete"):
            _load(absent)
    cfg = _load("~trainer.log_val_generations=0")
    assert "trainer.log_val_generations" not in cfg
    assert cfg.deleted["trainer.log_val_generations"].text == "~trainer.log_val_generations=0"
    with pytest.raises(VerlConfigError, match="its value is 0, not 5"):
        _load("~trainer.log_val_generations=5")


@pytest.mark.parametrize(("override", "message"), [
    ("trainer.no_such_key=1", "Hydra refuses to add keys without +"),
    ("+trainer.nnodes=2", "Hydra refuses + on an existing key"),
    ("trainer.nnodes=1,2", "a multirun sweep"),
    ("trainer.nnodes=[", "not a Hydra override"),
    ("trainer.nnodes=" + "[" * 3000 + "]" * 3000, "nested too deeply"),
    ("model_engine=veomni", "verl's veomni engine; rlctl trains with fsdp (dp) or megatron"),
    ("actor@actor_rollout_ref.actor=mlite_actor", "a config-group choice other than verl's"),
    ("+model_engine=megatron", "adding or deleting a config group"),
    ("reward_model@reward_model=dp_reward_loop", "not a config group of verl main@1dda039b"),
])
def test_overrides_hydra_or_rlctl_refuse(override: str, message: str) -> None:
    with pytest.raises(VerlConfigError, match=re.escape(message)):
        _load(override)


def test_config_group_choices_choose_the_base() -> None:
    cfg = _load("model_engine=megatron", f"{A}.megatron.tensor_model_parallel_size=2")
    assert cfg.get(f"{A}.strategy") == "megatron" and cfg.baseline.variant == "megatron"
    assert cfg.changed(f"{A}.megatron.tensor_model_parallel_size")
    assert not any(cfg.changed(k) for k in cfg.values if k.startswith("critic."))
    assert [g.note for g in cfg.groups] == ["config-group choice: verl's megatron config"]
    by_name = _load(config_name="ppo_megatron_trainer")
    assert by_name.get(f"{A}.strategy") == "megatron"
    same = _load("actor@actor_rollout_ref.actor=dp_actor", "model_engine=dp")
    assert [g.note for g in same.groups] == ["config-group choice at verl's default",
                                             "config-group choice: verl's fsdp config"]


def test_megatron_on_a_users_own_fsdp_config_needs_the_megatron_yaml(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(MAIN.read_text().replace("  train_batch_size: 1024", "  train_batch_size: 64"))
    with pytest.raises(VerlConfigError, match="give verl's _generated_ppo_megatron_trainer.yaml"):
        _load("model_engine=megatron", path=mine)
