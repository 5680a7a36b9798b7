"""Building and tearing down everything a run needs: Ray, the data plane, worker groups.

``ray`` mode: worker groups are Ray actors (Ray started on loopback when no address is
given). ``local`` mode: every role is an object in the controller's process — the same
worker classes and the same controller code path, so a breakpoint in a loss works.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from typing import Any, Self

from rlctl.config.loaded import LoadedRecipe
from rlctl.config.recipe import Recipe
from rlctl.trainer.controller.worker_group import (
    LocalWorkerGroup,
    RayWorkerGroup,
    TrafficMeter,
    WorkerGroup,
)


def training_roles(recipe: Recipe) -> tuple[str, ...]:
    roles = ["actor"]
    if recipe.algorithm.kl.apply_in != "none":
        roles.append("ref")  # the reference is the frozen initial policy
    if recipe.critic.enabled:
        roles.append("critic")
    return tuple(roles)


def uses_reward_models(recipe: Recipe, registry: Any) -> bool:
    """Whether a ``[[rewards]]`` entry is a model reward (it needs the reward workers)."""
    from rlctl.rewards.reward_set import reward_kind
    from rlctl.trainer.worker.reward_sections import effective_rewards

    return any(reward_kind(registry.get("reward_function", r.name)) == "model"
               for r in effective_rewards(recipe, registry))


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
        from rlctl.dataplane import open_data_plane
        from rlctl.dataplane.replay_buffer import ReplayBuffer
        from rlctl.models.loading import load_tokenizer
        from rlctl.ports import free_port
        from rlctl.registry import get_registry
        from rlctl.run.runtime import apply_loopback_env, start_ray, stop_ray
        from rlctl.trainer.controller.prompts import PromptFeeder
        from rlctl.trainer.controller.trainer import Trainer

        recipe = self.recipe
        apply_loopback_env()
        local = recipe.resources.mode == "local"
        registry = get_registry()
        plane_reg = registry.get("data_plane", recipe.data_plane.backend)
        needs_ray = not local or bool(plane_reg.metadata.get("multi_process", False))
        if needs_ray and start_ray(
            address=recipe.resources.address, num_cpus=recipe.resources.num_cpus
        ):
            self.stack.callback(stop_ray)
        if needs_ray:
            from rlctl.run.signals import reinstall

            reinstall()  # ray.init took SIGTERM over (stack dump + abort): a run stops cleanly

        self.plane = open_data_plane(recipe.data_plane.backend,
                                     self.loaded.options_for("data_plane.options"),
                                     run_id=self.run_id)
        self.stack.callback(self.plane.close)
        cpus = os.cpu_count() or 1
        if local:
            import torch

            torch.set_num_threads(cpus)
            self.rollout: WorkerGroup = self._local_group("rollout", self._rollout_worker(0, None))
            self.train: WorkerGroup = self._local_group(
                "train", self._training_worker(0, 1, free_port(), None)
            )
            if uses_reward_models(recipe, registry):
                from rlctl.trainer.worker.reward_worker import RewardWorker

                self.reward = self._local_group("reward", RewardWorker(recipe, self.plane))
        else:
            from rlctl.trainer.worker.rollout_worker import RolloutWorker
            from rlctl.trainer.worker.training_worker import TrainingWorker

            ranks = recipe.engines.train.ranks
            # One thread per training rank: ranks run in parallel on a small box; rollout runs
            # while training ranks idle, so it may use every core.
            train_threads = max(cpus // ranks, 1)
            self.train = RayWorkerGroup(
                "train",
                TrainingWorker,
                [
                    {"loaded": self.loaded, "plane": self.plane, "roles": training_roles(recipe),
                     "rank": r, "world_size": ranks, "threads": train_threads}
                    for r in range(ranks)
                ],
                self.meter,
                **self._bounds(),
            )
            self.stack.callback(self.train.shutdown)
            workers = recipe.engines.rollout.agent_workers
            self.rollout = RayWorkerGroup(
                "rollout",
                RolloutWorker,
                [{"loaded": self.loaded, "plane": self.plane, "rank": r,
                  "threads": max(cpus // workers, 1)} for r in range(workers)],
                self.meter,
                **self._bounds(),
            )
            self.stack.callback(self.rollout.shutdown)
            if uses_reward_models(recipe, registry):
                from rlctl.trainer.worker.reward_worker import RewardWorker

                count = recipe.engines.reward.workers
                self.reward = RayWorkerGroup(
                    "reward", RewardWorker,
                    [{"recipe": recipe, "plane": self.plane, "rank": r,
                      "threads": max(cpus // count, 1)} for r in range(count)],
                    self.meter,
                )
                self.stack.callback(self.reward.shutdown)

        tokenizer = load_tokenizer(recipe.model)
        task_options = self.loaded.options_for("data.task_options")
        tool_options = [self.loaded.options_for(f"rollout.tools[{i}].options")
                        for i in range(len(recipe.rollout.tools))]
        feeder = PromptFeeder(recipe, tokenizer, self.plane, split="train",
                              task_options=task_options, tool_options=tool_options)
        val_feeder = None
        if recipe.schedule.eval_every and (
            recipe.data.val is not None or recipe.data.task is not None
        ):
            val_feeder = PromptFeeder(recipe, tokenizer, self.plane, split="val",
                                      task_options=task_options, tool_options=tool_options)
        self.replay = ReplayBuffer(self.plane)
        self.trainer = Trainer(
            recipe,
            self.derived,
            plane=self.plane,
            rollout=self.rollout,
            train=self.train,
            feeder=feeder,
            val_feeder=val_feeder,
            replay_buffer=self.replay,
            meter=self.meter,
            use_object_refs=not local,
            run_dir=self.run_dir,
            staleness=registry.load("staleness_policy", recipe.algorithm.staleness.policy)(
                self.loaded.options_for("algorithm.staleness.options")),
            reward=self.reward,
        )
        # Before the plane closes (exit callbacks run last in, first out); a run that already
        # failed keeps its own error, not a clear's that the failure caused.
        self.stack.push(lambda kind, exc, tb: self.trainer.close(quiet=exc is not None))
        # Version 0: the rollout engines start from exactly the actor's initial weights.
        self.trainer.sync_weights(version=0)
        from rlctl.trainer.startup_heap import freeze_startup_heap

        freeze_startup_heap()  # models and engines are built (in --local, all of them)

    def _bounds(self) -> dict[str, float]:
        schedule = self.recipe.schedule
        return {"start_timeout": schedule.start_timeout_s, "timeout": schedule.phase_timeout_s}

    def _local_group(self, name: str, worker: Any) -> WorkerGroup:
        schedule = self.recipe.schedule
        group = LocalWorkerGroup(name, [worker], self.meter, timeout=schedule.phase_timeout_s)
        self.stack.callback(group.shutdown)
        group.call("ready", timeout=schedule.start_timeout_s)
        return group

    def _rollout_worker(self, rank: int, threads: int | None) -> Any:
        from rlctl.trainer.worker.rollout_worker import RolloutWorker

        return RolloutWorker(self.loaded, self.plane, rank=rank, threads=threads)

    def _training_worker(self, rank: int, world: int, port: int, threads: int | None) -> Any:
        from rlctl.trainer.worker.training_worker import TrainingWorker

        return TrainingWorker(self.loaded, self.plane, training_roles(self.recipe), rank=rank,
                              world_size=world, master_port=port, threads=threads)
