"""Cross-field checks (with registry metadata) and plugin validate_config hooks."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rlctl.config.loaded import LoadedRecipe
from rlctl.config.pipeline import load_recipe
from rlctl.config.problems import ConfigError, ConfigProblem
from rlctl.hookspecs import hookimpl
from rlctl.registry import Registry, build_registry
from tests.config.config_helpers import BASE

Problems = Callable[..., list[ConfigProblem]]


def paths(problems: list[ConfigProblem]) -> list[str]:
    return [p.path for p in problems]


def test_estimator_needing_values_requires_a_critic(problems: Problems, load) -> None:  # type: ignore[no-untyped-def]
    (p,) = problems(BASE, overrides=["algorithm.estimator=gae"])
    assert p.path == "algorithm.estimator"
    assert "critic.enabled = false" in p.message and "grpo" in p.fix
    load(BASE, overrides=["algorithm.estimator=gae", "critic.enabled=true"])


def test_group_based_estimator_needs_groups(problems: Problems, load) -> None:  # type: ignore[no-untyped-def]
    assert paths(problems(BASE, overrides=["algorithm.group_size=1"])) == [
        "algorithm.group_size"]
    load(BASE, overrides=["algorithm.group_size=1", "algorithm.estimator=reinforce_plus_plus"])


def test_batch_arithmetic(problems: Problems, load) -> None:  # type: ignore[no-untyped-def]
    # 64 prompts x 8 = 512 samples
    (p,) = problems(BASE, overrides=["algorithm.minibatches=3"])
    assert p.path == "algorithm.minibatches" and "512 samples" in p.message
    assert "1, 2, 4, 8" in p.fix
    (p,) = problems(BASE, overrides=["algorithm.minibatches=512", "engines.train.ranks=3",
                                     "resources.devices_per_node=3"])
    assert p.path == "engines.train.ranks"
    (p,) = problems(BASE, overrides=["algorithm.minibatches=4", "engines.train.ranks=2",
                                     "resources.devices_per_node=2",
                                     "engines.train.micro_batch_size=128"])
    assert p.path == "engines.train.micro_batch_size"
    assert "per-rank minibatch of 64 samples" in p.message
    loaded = load(BASE, overrides=["algorithm.minibatches=4", "engines.train.ranks=2",
                                   "resources.devices_per_node=2",
                                   "engines.train.micro_batch_size=16"])
    assert loaded.derived.as_dict() == {
        "samples_per_step": 512, "prompts_per_minibatch": 16, "minibatch_size": 128,
        "data_parallel_size": 2, "minibatch_size_per_rank": 64,
        "micro_batches_per_rank": 4, "grad_accumulation_steps": 4,
        "optimizer_steps_per_train_step": 4}


def test_local_mode_runs_one_rank_and_derives_its_numbers_once(load) -> None:  # type: ignore
    overrides = ["algorithm.minibatches=4", "engines.train.ranks=2",
                 "resources.devices_per_node=2", "engines.train.micro_batch_size=16"]
    ray = load(BASE, overrides=overrides)
    local = load(BASE, overrides=[*overrides, 'resources.mode="local"'])
    assert ray.recipe.engines.train.ranks == 2 and local.recipe.engines.train.ranks == 1
    assert local.sources["engines.train.ranks"] == "local mode (one rank per role)"
    # the math is the same; the per-rank numbers are those of the one rank that runs
    assert local.derived.minibatch_size == ray.derived.minibatch_size == 128
    assert (local.derived.minibatch_size_per_rank, local.derived.micro_batches_per_rank) == (128, 8)


def test_plugin_options_are_validated_once_at_load(load, registry) -> None:  # type: ignore
    from rlctl.config.pipeline import validate_recipe
    from rlctl.engines.train.fsdp.options import FSDPOptions

    loaded = load(BASE, overrides=['engines.train.options.mixed_precision="bf16"'])
    options = loaded.options_for("engines.train.options")
    assert isinstance(options, FSDPOptions) and options.mixed_precision == "bf16"
    # the task's default reward (no [[rewards]]) has its options validated too
    assert loaded.recipe.rewards == [] and "rewards[0].options" in loaded.plugin_options
    assert loaded.option_kwargs("algorithm.estimator_options") == {}  # grpo has no options
    again = validate_recipe(loaded.recipe, registry=registry)
    assert again.options_for("engines.train.options") == options
    assert set(again.sources.values()) == {"in code"}
    recipe = loaded.recipe
    train = recipe.engines.train.model_copy(update={"options": {"mixed_precison": "bf16"}})
    typo = recipe.model_copy(update={"engines": recipe.engines.model_copy(update={"train": train})})
    with pytest.raises(ConfigError, match="engines.train.options.mixed_precison"):
        validate_recipe(typo, registry=registry)


def test_more_ranks_than_devices(problems: Problems) -> None:
    (p,) = problems(BASE, overrides=["engines.train.ranks=2"])
    assert p.path == "engines.train.ranks" and "devices_per_node >= 2" in p.fix


@pytest.mark.parametrize(
    ("override", "path", "registered"),
    [
        ("engines.train.backend=fdsp", "engines.train.backend", "fsdp"),
        ("engines.rollout.backend=vlm", "engines.rollout.backend", "vllm"),
        ("engines.rollout.weight_sync=nccl", "engines.rollout.weight_sync", "in_process"),
        ("algorithm.estimator=ppo", "algorithm.estimator", "grpo"),
        ("algorithm.loss.policy_loss=clip", "algorithm.loss.policy_loss", "vanilla"),
        ("data.task=count", "data.task", "count_digits"),
        ("rollout.agent_loop=multi_turn", "rollout.agent_loop", "single_turn"),
        ("data_plane.backend=redis", "data_plane.backend", "ray"),
        ("logging.sinks=['console','wandbb']", "logging.sinks[1]", "wandb"),
        ("rewards=[{name='gsm9k'}]", "rewards[0].name", "gsm8k"),
    ],
)
def test_unknown_names_list_the_registered_ones(
    problems: Problems, registry: Registry, override: str, path: str, registered: str
) -> None:
    (p,) = problems(BASE, overrides=[override])
    assert p.path == path
    assert "is registered" in p.message
    assert registered in p.fix


def test_prompts_come_from_exactly_one_source(problems: Problems) -> None:
    (p,) = problems("[[rewards]]\nname = 'gsm8k'\n")
    assert p.path == "data" and "count_digits" in p.fix
    (p,) = problems(BASE, overrides=["data.train=train.parquet"])
    assert p.path == "data.task"


def test_parquet_prompts_need_a_reward(problems: Problems, load) -> None:  # type: ignore[no-untyped-def]
    (p,) = problems('[data]\ntrain = "train.parquet"\n')
    assert p.path == "rewards" and "gsm8k" in p.fix
    load('[data]\ntrain = "t.parquet"\n[[rewards]]\nname = "gsm8k"\n')


@pytest.mark.parametrize("where", ["none", "loss", "reward"])
def test_kl_anywhere_is_fine_the_reference_is_the_initial_policy(load, where: str) -> None:  # type: ignore[no-untyped-def]
    assert load(BASE, overrides=[f"algorithm.kl.in={where}"]).recipe.algorithm.kl.apply_in == where


def test_weight_sync_must_support_the_rollout_engine(problems: Problems) -> None:
    (p,) = problems(BASE, overrides=["engines.rollout.weight_sync=vllm"])
    assert p.path == "engines.rollout.weight_sync" and '"hf"' in p.message


def test_weight_sync_options_are_checked_by_the_default_syncs_model(
    problems: Problems, load  # type: ignore[no-untyped-def]
) -> None:
    vllm = ["engines.rollout.backend=vllm", "model.tiny.head_dim=32"]
    key = "engines.rollout.weight_sync_options.transport"
    (p,) = problems(BASE, overrides=[*vllm, f"{key}=pigeon"])
    assert p.path == key and "http_bytes" in p.fix
    loaded = load(BASE, overrides=[*vllm, f"{key}=http_bytes"])
    assert loaded.options_for("engines.rollout.weight_sync_options").transport == "http_bytes"
    # the hf engine's default sync (in_process) takes no transport
    (p,) = problems(BASE, overrides=["engines.rollout.weight_sync_options.transport=file"])
    assert p.path == "engines.rollout.weight_sync_options.transport" and "unknown key" in p.message


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
def test_weight_sync_options_in_the_engines_options_point_at_their_new_place(
    problems: Problems, backend: str
) -> None:
    (p,) = problems(BASE, overrides=[f"engines.rollout.backend={backend}",
                                     "engines.rollout.options.weight_sync.transport=disk"])
    assert p.path == "engines.rollout.options.weight_sync"
    assert "moved to [engines.rollout.weight_sync_options]" in p.message
    assert p.fix == ("move the keys of [engines.rollout.options.weight_sync] to "
                     "[engines.rollout.weight_sync_options]")


def test_eval_needs_validation_prompts(problems: Problems) -> None:
    (p,) = problems('[data]\ntrain = "t.parquet"\n[[rewards]]\nname = "gsm8k"\n',
                    overrides=["schedule.eval_every=10"])
    assert p.path == "schedule.eval_every"


def test_duplicate_sinks(problems: Problems) -> None:
    assert paths(problems(BASE, overrides=["logging.sinks=['jsonl','jsonl']"])) == [
        "logging.sinks"]


class _GroupOfFour:
    """A third-party plugin with its own opinion about the recipe."""

    @hookimpl
    def validate_config(self, recipe):  # type: ignore[no-untyped-def]
        if recipe.algorithm.group_size != 4:
            return [ConfigProblem("algorithm.group_size", "this plugin wants 4", "set it to 4")]
        return None


class _Crashing:
    @hookimpl
    def validate_config(self, recipe):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")


def test_validate_config_hooks_add_problems_and_a_crash_is_reported(write) -> None:  # type: ignore[no-untyped-def]
    registry = build_registry(external="none")
    registry.pm.register(_GroupOfFour(), name="group-of-four")
    registry.pm.register(_Crashing(), name="crashing")
    with pytest.raises(ConfigError) as err:
        load_recipe([write(BASE)], env={}, registry=registry)
    found = {(p.path, p.message) for p in err.value.problems}
    assert found == {
        ("algorithm.group_size", "this plugin wants 4"),
        ("", "validate_config of plugin crashing raised RuntimeError: boom"),
    }
    registry.pm.unregister(name="crashing")
    loaded = load_recipe([write(BASE)], ["algorithm.group_size=4"], env={}, registry=registry)
    assert isinstance(loaded, LoadedRecipe)
