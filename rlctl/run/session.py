"""Building and tearing down everything a run needs, in one order whatever the mode.

Ray (when a worker group or the data plane needs it) -> the placement (Ray mode: the plan's
devices reserved as one placement group, :mod:`rlctl.run.placement`) -> the data plane -> the
step plan -> the worker groups (training, rollout, reward models; each worker in its seat) ->
the prompt feeders -> the rollout producers -> the trainer, then the rollout engines get the
actor's initial weights. ``ray`` mode runs every group as Ray actors (Ray started on loopback
when no address is given);
``local`` mode runs each role's one rank as an object in the controller's process: the same
worker classes, the same start (:meth:`WorkerGroup.start`) and the same controller code, so
a breakpoint in a loss works.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Self

from rlctl.config.loaded import LoadedRecipe
from rlctl.config.placement import Role
from rlctl.plugin_parity import PluginPin, plugin_pins
from rlctl.trainer.controller.worker_group import TrafficMeter, WorkerGroup, new_worker_group

if TYPE_CHECKING:
    from rlctl.run.placement import ClusterPlacement

TRAIN, VAL = "train", "val"


def uses_reward_models(loaded: LoadedRecipe, registry: Any) -> bool:
    """Whether a ``[[rewards]]`` entry is a model reward (it needs the reward workers)."""
    from rlctl.rewards.reward_set import reward_kind
    from rlctl.trainer.worker.reward_sections import effective_rewards

    return any(reward_kind(registry.get("reward_function", r.name)) == "model"
               for r in effective_rewards(loaded.recipe, registry))


class Session:
    """Owns the run's processes; use as a context manager so everything is always closed."""

    def __init__(self, loaded: LoadedRecipe, *, run_id: str, run_dir: Any = None) -> None:
        self.run_dir = run_dir
        self.loaded = loaded
        self.recipe = loaded.recipe
        self.derived = loaded.derived
        self.run_id = run_id
        self.stack = ExitStack()
        self.meter = TrafficMeter()
        self.reward: WorkerGroup | None = None  # started only when a reward is a model
        self.plugins: tuple[PluginPin, ...] = ()
        """What every Ray worker must have (:mod:`rlctl.plugin_parity`); none in --local."""
        self.placement: ClusterPlacement | None = None
        """Where every worker runs (Ray mode); ``None`` in --local."""

    def __enter__(self) -> Self:
        try:
            self._start()
        except BaseException:
            self.stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        # __exit__, not close(): the exit callbacks see whether the run is failing
        self.stack.__exit__(*exc)  # type: ignore[arg-type]

    def _start(self) -> None:
        from rlctl.algorithms.staleness import policy_of
        from rlctl.registry import get_registry
        from rlctl.trainer.plan import build_plan

        registry = get_registry()
        # Ray workers must have the plugins this process loaded; --local ranks share them.
        self.plugins = () if self.in_process else plugin_pins(registry)
        self._start_ray(registry)
        self._reserve(registry)
        self.plane = self._open_plane()
        self.policy = policy_of(self.loaded)
        self.plan = build_plan(self.loaded, registry, self.policy)
        self._start_groups(registry)
        self._build_trainer(registry)
        # Version 0: the rollout engines start from exactly the actor's initial weights.
        self.trainer.sync_weights(version=0)
        from rlctl.trainer.startup_heap import freeze_startup_heap

        freeze_startup_heap()  # models and engines are built (in --local, all of them)

    # ------------------------------------------------------------------ infrastructure
    @property
    def in_process(self) -> bool:
        return self.recipe.resources.mode == "local"

    def _start_ray(self, registry: Any) -> None:
        """Start (or join) Ray when a worker group or the data plane needs it."""
        from rlctl.run.runtime import apply_run_env, cluster_address, start_ray, stop_ray

        resources = self.recipe.resources
        address = cluster_address(resources.address)
        apply_run_env(joining=address is not None)
        plane = registry.get("data_plane", self.recipe.data_plane.backend)
        if self.in_process and not plane.metadata.get("multi_process", False):
            return
        if start_ray(address=address, num_cpus=resources.num_cpus,
                     worker_logs=not self.in_process):
            self.stack.callback(stop_ray)
        from rlctl.run.signals import reinstall

        reinstall()  # ray.init took SIGTERM over (stack dump + abort): a run stops cleanly

    def _reserve(self, registry: Any) -> None:
        """Ray mode: reserve the placement plan's devices (bounded by
        ``schedule.start_timeout_s``; released when the session closes)."""
        if self.in_process:
            return
        from rlctl.config.placement import placement_of
        from rlctl.run.placement import reserve

        plan = placement_of(self.recipe, registry,
                            self.loaded.options_for("engines.rollout.options"))
        self.placement = reserve(plan, timeout_s=self.recipe.schedule.start_timeout_s)
        self.stack.callback(self.placement.release)

    def whereabouts(self) -> list[dict[str, Any]]:
        """Every worker's seat and what its process reports (``placement.json``)."""
        if self.placement is None:
            return []
        from rlctl.trainer.worker.contract import Worker

        groups = [g for g in (self.train, self.rollout, self.reward) if g is not None]
        reported = [row for g in groups for row in g.call(Worker.whereabouts)]
        return [dict(seat, reported=seen)
                for seat, seen in zip(self.placement.rows(), reported, strict=True)]

    def _open_plane(self) -> Any:
        from rlctl.dataplane import open_data_plane

        plane = open_data_plane(self.recipe.data_plane.backend,
                                self.loaded.options_for("data_plane.options"), run_id=self.run_id)
        self.stack.callback(plane.close)
        return plane

    # ------------------------------------------------------------------ worker groups
    def _group(self, role: Role, worker_cls: type, per_rank: list[dict[str, Any]]
               ) -> WorkerGroup:
        """One role's ranks, created (Ray actors, each in its seat; or in this process) and
        closed with the session; :meth:`_start_groups` starts them."""
        schedule = self.recipe.schedule
        options = None
        if self.placement is not None:
            seats = self.placement.plan.of(role)
            options = [self.placement.actor_options(seat) for seat in seats]
            per_rank = [dict(kw, placed=self.placement.placed(seat))
                        for kw, seat in zip(per_rank, seats, strict=True)]
        group = new_worker_group(role, worker_cls, per_rank, self.meter,
                                 in_process=self.in_process,
                                 timeout=schedule.phase_timeout_s,
                                 liveness_timeout=schedule.liveness_timeout_s,
                                 actor_options=options)
        self.stack.callback(group.shutdown)
        return group

    def _start_groups(self, registry: Any) -> None:
        """Every role's group created first, then each started in turn (training, rollout,
        reward models): in Ray mode the later roles' processes start and import while the
        training ranks build their engines, instead of after."""
        from rlctl.trainer.worker.reward_worker import RewardWorker
        from rlctl.trainer.worker.rollout_worker import RolloutWorker
        from rlctl.trainer.worker.training_worker import TrainingWorker

        engines = self.recipe.engines
        if self.in_process and "OMP_NUM_THREADS" not in os.environ:
            import torch

            # Every CPU this process may run on (a container or taskset may allow fewer than
            # the machine has); a user's OMP_NUM_THREADS, which torch already follows, wins.
            torch.set_num_threads(len(os.sched_getaffinity(0)))
        common = {"loaded": self.loaded, "plane": self.plane}
        ranks = engines.train.ranks
        self.train = self._group("train", TrainingWorker, [
            dict(common, plan=self.plan, rank=r, world_size=ranks) for r in range(ranks)])
        self.rollout = self._group("rollout", RolloutWorker, [
            dict(common, rank=r) for r in range(engines.rollout.agent_workers)])
        if uses_reward_models(self.loaded, registry):
            self.reward = self._group("reward", RewardWorker, [
                dict(common, rank=r) for r in range(engines.reward.workers)])
        for group in (self.train, self.rollout, self.reward):
            if group is not None:
                group.start(self.recipe.schedule.start_timeout_s, self.plugins)

    # ------------------------------------------------------------------ the controller
    def _build_trainer(self, registry: Any) -> None:
        from rlctl.dataplane.replay_buffer import ReplayBuffer
        from rlctl.models.loading import load_tokenizer
        from rlctl.trainer.controller.background_clears import BackgroundClears
        from rlctl.trainer.controller.step_timer import StepTimer
        from rlctl.trainer.controller.trainer import Trainer

        recipe = self.recipe
        tokenizer = load_tokenizer(recipe.model)
        self.timer = StepTimer()
        self.replay = ReplayBuffer(self.plane)
        # Finished keys leave the data plane while the next step generates.
        self.clears = BackgroundClears(self.plane, recipe.schedule.phase_timeout_s)
        schemas = self._tool_schemas(registry)
        self.producer = self._producer(TRAIN, tokenizer, schemas, registry)
        validation = None
        if recipe.schedule.eval_every and (recipe.data.val is not None
                                           or recipe.data.task is not None):
            validation = self._producer(VAL, tokenizer, schemas, registry)
        self.trainer = Trainer(
            recipe, self.derived, self.plan, train=self.train, rollout=self.rollout,
            producer=self.producer, validation=validation, dp_ranks=self._dp_ranks(),
            meter=self.meter, timer=self.timer, use_object_refs=not self.in_process,
            run_dir=self.run_dir)
        # Before the plane closes (exit callbacks run last in, first out); a run that already
        # failed keeps its own error, not a clear's that the failure caused.
        self.stack.push(lambda kind, exc, tb: self.trainer.close(quiet=exc is not None))

    def _producer(self, partition: str, tokenizer: Any, tool_schemas: list[dict[str, Any]] | None,
                  registry: Any) -> Any:
        """The rollout producer of ``partition``: training draws with the recipe's staleness
        policy and dynamic sampling; validation on-policy, as drawn."""
        from rlctl.algorithms.staleness import OnPolicy
        from rlctl.engines.rollout.contract import SamplingParams
        from rlctl.plugin_contracts import where_defined
        from rlctl.trainer.controller.dynamic_sampling import DynamicSampler
        from rlctl.trainer.controller.producer import ProducerSettings, RolloutProducer
        from rlctl.trainer.controller.prompts import PromptFeeder
        from rlctl.trainer.worker.rollout_worker import generate_bound

        recipe = self.recipe
        alg, train = recipe.algorithm, partition == TRAIN
        feeder = PromptFeeder(recipe, tokenizer, self.plane, split=partition,
                              task_options=self.loaded.options_for("data.task_options"),
                              tool_schemas=tool_schemas)
        settings = ProducerSettings(
            partition=partition,
            groups=alg.prompts_per_step if train else recipe.data.val_size,
            group_size=alg.group_size if train else recipe.rollout.val_group_size,
            sampling=SamplingParams.from_recipe(recipe, validation=not train),
            bound_s=generate_bound(recipe), last_step=recipe.schedule.total_steps,
            partial_rollout=train and alg.staleness.partial_rollout == "resume")
        dynamic = (DynamicSampler(alg.dynamic_sampling, alg.prompts_per_step,
                                  rollout=self.rollout)
                   if train and alg.dynamic_sampling.enabled else None)
        policy, label = OnPolicy(), "the on_policy validation draw"
        if train:
            reg = registry.get("staleness_policy", alg.staleness.policy)
            policy = self.policy
            label = f"{reg.describe()} (defined at {where_defined(policy)})"
        return RolloutProducer(settings, plane=self.plane, rollout=self.rollout,
                               reward=self.reward, feeder=feeder, replay=self.replay,
                               policy=policy, timer=self.timer, clears=self.clears,
                               dynamic=dynamic, policy_label=label)

    def _tool_schemas(self, registry: Any) -> list[dict[str, Any]] | None:
        """The recipe's tool descriptions for the chat template (``None`` without tools):
        the tools are built here, for their schemas only (they build cheaply)."""
        if not self.recipe.rollout.tools:
            return None
        from rlctl.agents.contract import tool_choices
        from rlctl.agents.tools import build_tools

        tools = build_tools(tool_choices(self.loaded), registry)
        return [tool.schema() for tool in tools.values()]

    def _dp_ranks(self) -> list[int]:
        """The data-parallel rank of every training rank (asked once, here: model-parallel
        peers, same DP rank, get the same shard)."""
        from rlctl.trainer.controller.trainer import StepError
        from rlctl.trainer.worker.training_worker import TrainingWorker

        layout = self.train.call(TrainingWorker.layout)
        sizes = {size for _, size, _ in layout}
        ranks = [r for r, _, _ in layout]
        if len(sizes) != 1 or sorted(set(ranks)) != list(range(sizes.pop())):
            raise StepError(f"training ranks report an inconsistent data-parallel layout {layout}")
        return ranks
