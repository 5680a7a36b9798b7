"""The placement plan (rlctl/config/placement.py): every worker's node and devices from the
recipe alone, refused at load when it cannot fit."""

from __future__ import annotations

from collections.abc import Callable

from rlctl.config.loaded import LoadedRecipe
from rlctl.config.placement import PlacementPlan, placement_of
from rlctl.config.problems import ConfigProblem
from rlctl.registry import Registry
from tests.config.config_helpers import BASE, ROOT

Load = Callable[..., LoadedRecipe]
Problems = Callable[..., list[ConfigProblem]]

RAY_2 = ["engines.train.ranks=2", "resources.devices_per_node=2"]
VLLM = ["engines.rollout.backend=vllm"]


def plan(loaded: LoadedRecipe, registry: Registry) -> PlacementPlan:
    return placement_of(loaded.recipe, registry,
                        loaded.options_for("engines.rollout.options"))


def seats(p: PlacementPlan) -> list[tuple[str, int, int, tuple[int, ...], float]]:
    return [(s.role, s.rank, s.node, s.devices, s.share) for s in p.seats]


def test_colocate_shares_the_training_devices(load: Load, registry: Registry) -> None:
    p = plan(load(BASE, overrides=RAY_2), registry)
    assert p.placement == "colocate"
    assert seats(p) == [("train", 0, 0, (0,), 0.5), ("train", 1, 0, (1,), 1.0),
                        ("rollout", 0, 0, (0,), 0.5)]
    assert p.used() == [[0, 1]]
    # CPU devices: ranks compute on their own core; the rollout worker, which runs while
    # they wait, on every core the plan uses on its node
    assert [p.cores_of(s) for s in p.seats] == [(0,), (1,), (0, 1)]


def test_split_gives_rollout_devices_of_its_own(load: Load, registry: Registry) -> None:
    p = plan(load(BASE, overrides=[*RAY_2, "resources.placement=split",
                                   "resources.devices_per_node=3"]), registry)
    assert seats(p) == [("train", 0, 0, (0,), 1.0), ("train", 1, 0, (1,), 1.0),
                        ("rollout", 0, 0, (2,), 1.0)]
    assert [p.cores_of(s) for s in p.seats] == [(0,), (1,), (2,)]


def test_rollout_nodes_puts_rollout_on_the_last_nodes(load: Load, registry: Registry) -> None:
    p = plan(load(BASE, overrides=[*RAY_2, "resources.placement=split", "resources.nodes=2",
                                   "resources.rollout_nodes=1"]), registry)
    assert seats(p) == [("train", 0, 0, (0,), 1.0), ("train", 1, 0, (1,), 1.0),
                        ("rollout", 0, 1, (0,), 1.0)]
    assert not p.spans_nodes("train") and p.request() == [
        "node 0: 2 GPU or CPU (devices 0,1)", "node 1: 1 GPU or CPU (devices 0)"]


def test_training_ranks_fill_nodes_in_order(load: Load, registry: Registry) -> None:
    p = plan(load(BASE, overrides=["engines.train.ranks=2", "resources.nodes=2",
                                   "resources.accelerator=gpu"]), registry)
    assert [(s.node, s.devices) for s in p.of("train")] == [(0, (0,)), (1, (0,))]
    assert p.spans_nodes("train") and p.resource() == "GPU"


def test_each_vllm_replica_of_qwen3_grpo_has_a_device_of_its_own(
        load: Load, registry: Registry) -> None:
    loaded = load((ROOT / "recipes" / "qwen3_grpo.toml").read_text())
    p = plan(loaded, registry)
    rollout = p.of("rollout")
    assert len(rollout) == loaded.recipe.engines.rollout.replicas == 8
    assert sorted(d for s in rollout for d in s.devices) == list(range(8))
    assert p.resource() == "GPU" and p.request() == ["node 0: 8 GPU (devices 0-7)"]


def test_a_worker_takes_every_device_of_its_servers(load: Load, registry: Registry) -> None:
    # 4 servers of 2 GPUs shared by 2 agent workers: each worker owns 2 servers = 4 GPUs
    p = plan(load(BASE, overrides=[*VLLM, "engines.rollout.replicas=4",
                                   "engines.rollout.agent_workers=2",
                                   "engines.rollout.options.tensor_parallel_size=2",
                                   "resources.devices_per_node=12", "resources.placement=split",
                                   "engines.train.ranks=4"]), registry)
    assert [(s.rank, s.devices) for s in p.of("rollout")] == [(0, (4, 5, 6, 7)),
                                                               (1, (8, 9, 10, 11))]


def test_too_many_training_ranks(problems: Problems) -> None:
    (p,) = problems(BASE, overrides=["engines.train.ranks=4", "resources.devices_per_node=2"])
    assert p.path == "engines.train.ranks" and "4 training ranks" in p.message
    assert "devices_per_node >= 4" in p.fix


def test_a_tensor_parallel_group_never_spans_nodes(problems: Problems) -> None:
    (p,) = problems(BASE, overrides=[*VLLM, "engines.rollout.options.tensor_parallel_size=2",
                                     "resources.nodes=2"])
    assert p.path == "resources.devices_per_node" and "never spans nodes" in p.message


def test_split_that_does_not_fit(problems: Problems, load: Load) -> None:
    (p,) = problems(BASE, overrides=[*RAY_2, "resources.placement=split"])
    assert p.path == "resources.nodes" and "rollout 0 does not fit" in p.message
    assert 'placement = "colocate"' in p.fix
    load(BASE, overrides=RAY_2)  # the same roles fit colocated
    load(BASE, overrides=[*RAY_2, "resources.placement=split", "resources.mode=local"])


def test_replicas_are_shared_out_evenly(problems: Problems, load: Load) -> None:
    (p,) = problems(BASE, overrides=[*VLLM, "engines.rollout.replicas=3",
                                     "engines.rollout.agent_workers=2",
                                     "resources.devices_per_node=4"])
    assert p.path == "engines.rollout.replicas" and "agent_workers (2)" in p.fix
    load(BASE, overrides=[*VLLM, "engines.rollout.replicas=4", "engines.rollout.agent_workers=2",
                          "resources.devices_per_node=4"])


def test_replicas_that_would_do_nothing_are_refused(problems: Problems) -> None:
    (p,) = problems(BASE, overrides=["engines.rollout.replicas=2"])  # hf: in the worker
    assert p.path == "engines.rollout.replicas" and "would do nothing" in p.message
    (p,) = problems(BASE, overrides=[*VLLM, "engines.rollout.replicas=2",
                                     'engines.rollout.options.urls=["http://127.0.0.1:1"]'])
    assert p.path == "engines.rollout.replicas"
