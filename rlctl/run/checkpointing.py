"""Saving and resuming a run: engines (sharded), rollout sampler state, controller state.

A checkpoint directory ``checkpoints/step_N/`` holds ``train/<role>/`` (torch.distributed
.checkpoint shards of model, optimizer and LR schedule, written by every training rank),
``rollout.json`` (sampler counters, so a resumed run draws the same samples),
``trainer_state.json`` (step, policy version, prompt-source position, KL controller, RNGs,
and the rollout producer's dispatches in flight: ``extra["producer"]``), ``in_flight/`` (the
finished samples of steps not yet trained, when a streaming policy dispatched ahead) and
``config.json`` (the resolved recipe).
:class:`CheckpointManager` makes it atomic: the ``latest`` pointer only moves once
everything is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlctl.config.recipe import Recipe
from rlctl.trainer.worker.rollout_worker import RolloutWorker
from rlctl.trainer.worker.training_worker import TrainingWorker

IN_FLIGHT_DIR = "in_flight"


def resolved_config(recipe: Recipe) -> dict[str, Any]:
    return recipe.model_dump(mode="json", by_alias=True)


class RunCheckpoints:
    """Checkpoint I/O of one run, driven by the controller between steps."""

    def __init__(self, recipe: Recipe, run_dir: Path) -> None:
        from rlctl.checkpoint import CheckpointManager

        self.recipe = recipe
        self.run_dir = run_dir
        self.manager = CheckpointManager(run_dir, keep_last=recipe.schedule.keep_last)

    def save(self, session: Any, step: int) -> Path:
        from rlctl.checkpoint import (
            TrainerState,
            capture_rng_state,
            config_fingerprint,
            save_config_snapshot,
        )

        trainer = session.trainer
        tmp = self.manager.begin(step)
        try:
            # first: it waits for the generations in flight, whose sampler draws the
            # rollout state below must include
            extra = {"producer": trainer.producer.checkpoint(tmp / IN_FLIGHT_DIR)}
            session.train.call(TrainingWorker.save, path=str(tmp / "train"))
            rollout_states = session.rollout.call(RolloutWorker.state_dict)
            (tmp / "rollout.json").write_text(json.dumps(rollout_states))
            config = resolved_config(self.recipe)
            save_config_snapshot(tmp, config)
            TrainerState(
                step=step,
                policy_version=trainer.policy_version,
                dataloader={
                    "train": trainer.producer.feeder.state_dict(),
                    "val": (trainer.validation.feeder.state_dict()
                            if trainer.validation is not None else {}),
                },
                kl_controller=trainer.kl_ctl.state_dict(),
                rng=capture_rng_state(),
                config_fingerprint=config_fingerprint(config),
                extra=extra,
            ).save(tmp)
        except BaseException:
            self.manager.abort(tmp)
            raise
        return self.manager.commit(tmp, step)

    def restore(self, session: Any, path: str | None, *, force: bool = False) -> int:
        """Load a checkpoint into a freshly started session; returns its step."""
        from rlctl.checkpoint import (
            TrainerState,
            check_resume_compatible,
            load_config_snapshot,
            restore_rng_state,
        )

        ckpt = self.manager.resolve(path)
        check_resume_compatible(
            load_config_snapshot(ckpt), resolved_config(self.recipe), force=force
        )
        state = TrainerState.load(ckpt)
        trainer = session.trainer
        session.train.call(TrainingWorker.load, path=str(ckpt / "train"))
        rollout_states = json.loads((ckpt / "rollout.json").read_text())
        if len(rollout_states) != session.rollout.world_size:
            raise ValueError(
                f"checkpoint {ckpt} has {len(rollout_states)} rollout worker states but this run "
                f"has {session.rollout.world_size}; resume with the same "
                "engines.rollout.agent_workers"
            )
        session.rollout.call(RolloutWorker.load_state_dict, [{"state": s} for s in rollout_states])
        trainer.producer.feeder.load_state_dict(state.dataloader["train"])
        if trainer.validation is not None and state.dataloader.get("val"):
            trainer.validation.feeder.load_state_dict(state.dataloader["val"])
        trainer.kl_ctl.load_state_dict(state.kl_controller)
        restore_rng_state(state.rng)
        # The rollout engines get the restored actor's weights, with the saved version.
        trainer.sync_weights(version=state.policy_version)
        if "producer" in state.extra:
            trainer.producer.restore(state.extra["producer"], ckpt / IN_FLIGHT_DIR)
        return state.step

    def export_hf(self, session: Any) -> Path:
        out = self.run_dir / "hf"
        session.train.call(TrainingWorker.export_hf, out_dir=str(out))
        return out
