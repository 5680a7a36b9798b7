"""verl's defaults shipped per release: the same as verl's published generated configs, with
attribution, and the release a config comes from is found."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rlctl.migrate.verl_release import by_name, compare, detect, leaves, names, releases, same

FIX = Path("tests/cli/migrate_fixtures")
DATA = Path("rlctl/migrate/verl_defaults")
FILES = {"fsdp": "_generated_ppo_trainer.yaml", "megatron": "_generated_ppo_megatron_trainer.yaml"}


def _raw(path: Path) -> dict:
    return leaves(OmegaConf.to_container(OmegaConf.load(path), resolve=False))


def test_the_shipped_releases() -> None:
    assert names() == ["v0.7.0", "v0.7.1", "v0.8.0", "v0.9.0", "main"]
    assert by_name("main").label == "main@1dda039b"


@pytest.mark.parametrize("release", ["v0.7.1", "v0.8.0", "v0.9.0", "main"])
@pytest.mark.parametrize("variant", ["fsdp", "megatron"])
def test_shipped_defaults_are_verls_published_configs(release: str, variant: str) -> None:
    raw = _raw(FIX / f"verl-{release}" / FILES[variant])
    assert by_name(release).leaves(variant) == raw
    match = detect(raw)
    assert (match.release.name, match.variant, match.exact) == (release, variant, True)


@pytest.mark.parametrize("path", sorted(DATA.glob("*.yaml")), ids=lambda p: p.name)
def test_each_data_file_names_its_source(path: Path) -> None:
    head = path.read_text().splitlines()[:8]
    commit = by_name(path.stem.removeprefix("verl-")).commit
    assert "https://github.com/verl-project/verl (Apache-2.0)" in head[1]
    assert commit in head[1] and len(commit) == 40
    assert any("verl/trainer/config/_generated_ppo_trainer.yaml" in line for line in head)
    assert any("_generated_ppo_megatron_trainer.yaml" in line for line in head)


def test_a_changed_config_is_matched_to_the_closest_release() -> None:
    raw = _raw(FIX / "verl-v0.8.0/_generated_ppo_trainer.yaml")
    raw["data.train_batch_size"] = 64
    raw["trainer.brand_new"] = 1
    match = detect(raw)
    assert (match.release.name, match.variant, match.differing) == ("v0.8.0", "fsdp", 2)
    assert compare(raw, by_name("v0.9.0"), "fsdp").differing > 2


def test_config_groups_per_release() -> None:
    assert "model_engine" not in by_name("v0.7.0").groups  # chosen by --config-name then
    for release in releases()[1:]:
        assert release.groups["model_engine"] == {"fsdp": "dp", "megatron": "megatron"}
        assert release.groups["actor@actor_rollout_ref.actor"] == {
            "fsdp": "dp_actor", "megatron": "megatron_actor"}


@pytest.mark.parametrize(("a", "b", "equal"), [
    (1, 1.0, True), (True, 1, False), ([1, 2], [1.0, 2], True), ({"a": 0}, {"a": 0.0}, True),
    ("1", 1, False), (None, None, True), (None, 0, False),
])
def test_values_compare_as_verl_reads_them(a, b, equal) -> None:  # type: ignore[no-untyped-def]
    assert same(a, b) is equal
