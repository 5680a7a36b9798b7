"""Precedence and deep merge: -s > RLCTL_* env > later files > earlier files > defaults."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rlctl.config.loading import resolve
from rlctl.config.recipe import Recipe

FIRST = """
[algorithm]
group_size = 4
prompts_per_step = 16
[algorithm.loss]
clip_high = 0.28
[[rewards]]
name = "digits_match"
weight = 2.0
"""
SECOND = """
[algorithm]
group_size = 6
[[rewards]]
name = "exact_match"
[[rewards]]
name = "length_penalty"
"""


def test_each_source_beats_the_ones_below_it(write: Callable[..., Path]) -> None:
    a, b = write(FIRST, "a.toml"), write(SECOND, "b.toml")
    env = {"RLCTL_ALGORITHM__GROUP_SIZE": "7", "RLCTL_ALGORITHM__EPOCHS": "3"}
    r = resolve([a, b], ["algorithm.epochs=5"], env)
    assert r.problems == []
    alg = r.recipe.algorithm
    assert alg.group_size == 7  # env beats both files
    assert alg.epochs == 5  # -s beats env
    assert alg.prompts_per_step == 16  # only the first file sets it
    assert alg.loss.clip_high == 0.28  # deep merge keeps the first file's sub-table
    assert alg.loss.clip_low == Recipe().algorithm.loss.clip_low  # default
    assert r.merged.source_of(("algorithm", "group_size")) == "env RLCTL_ALGORITHM__GROUP_SIZE"
    assert r.merged.source_of(("algorithm", "epochs")) == "-s algorithm.epochs=5"
    assert r.merged.source_of(("algorithm", "prompts_per_step")) == str(a)
    assert r.merged.source_of(("algorithm", "minibatches")) == "default"


def test_later_file_replaces_a_list_of_tables_whole(write: Callable[..., Path]) -> None:
    r = resolve([write(FIRST, "a.toml"), write(SECOND, "b.toml")], [], {})
    assert [(x.name, x.weight) for x in r.recipe.rewards] == [
        ("exact_match", 1.0), ("length_penalty", 1.0)]


def test_numeric_keys_address_list_elements(write: Callable[..., Path]) -> None:
    a = write(FIRST, "a.toml")
    r = resolve([a], ["rewards.0.weight=0.5"], {"RLCTL_REWARDS__0__OPTIONS__X": "1"})
    (reward,) = r.recipe.rewards
    assert (reward.name, reward.weight, reward.options) == ("digits_match", 0.5, {"x": 1})
    assert r.merged.source_of(("rewards", 0, "name")) == str(a)
    assert r.merged.source_of(("rewards", 0, "weight")) == "-s rewards.0.weight=0.5"


def test_index_past_the_end_of_a_list_is_a_problem(write: Callable[..., Path]) -> None:
    r = resolve([write(FIRST)], ["rewards.3.weight=1"], {})
    assert [(p.path, p.source) for p in r.problems] == [
        ("rewards[3]", "-s rewards.3.weight=1")]


def test_string_fields_keep_the_text_of_a_literal(write: Callable[..., Path]) -> None:
    r = resolve([write(FIRST)], ["run.name=123", "model.path=007"],
                {"RLCTL_MODEL__TOKENIZER": "true"})
    assert r.problems == []
    assert (r.recipe.run.name, r.recipe.model.path, r.recipe.model.tokenizer) == (
        "123", "007", "true")


def test_a_number_in_a_recipe_file_is_not_silently_a_string(write: Callable[..., Path]) -> None:
    r = resolve([write("[run]\nname = 123\n")], [], {})
    assert [p.path for p in r.problems] == ["run.name"]


def test_kl_in_alias_is_read_and_written_as_in(write: Callable[..., Path]) -> None:
    r = resolve([write('[algorithm.kl]\nin = "reward"\n')], [], {})
    assert r.recipe.algorithm.kl.apply_in == "reward"
    assert r.recipe.model_dump(by_alias=True)["algorithm"]["kl"]["in"] == "reward"


def test_a_table_replacing_nothing_leaves_other_keys_default(write: Callable[..., Path]) -> None:
    r = resolve([write("[critic]\nlr = 1e-4\n")], [], {})
    assert r.merged.source_of(("critic", "lr")) != "default"
    assert r.merged.source_of(("critic", "enabled")) == "default"


def test_field_name_and_alias_are_one_key(write: Callable[..., Path]) -> None:
    a = write('[algorithm.kl]\nin = "loss"\n', "a.toml")
    b = write('[algorithm.kl]\napply_in = "reward"\n', "b.toml")
    r = resolve([a, b], [], {})
    assert r.recipe.algorithm.kl.apply_in == "reward"  # the later file wins
    assert r.merged.source_of(("algorithm", "kl", "in")) == str(b)
    r = resolve([b], ["algorithm.kl.in=none"], {})
    assert r.recipe.algorithm.kl.apply_in == "none"
