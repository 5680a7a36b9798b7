"""Colocated memory: the trainer releases the rollout's memory after generating and before
training, the rollout takes its weights back before the weight sync and its KV cache after it,
and nothing is released where the plan keeps it (a recording engine: the hf engine that says
it can release, in local mode; the server engines' requests are tests/engines/rollout/server's).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import pytest

from rlctl.engines.rollout.contract import MEMORY_PARTS, MemoryPart, MemoryRelease
from rlctl.engines.rollout.hf.engine import HFRolloutEngine
from rlctl.hookspecs import hookimpl
from rlctl.registry import build_registry, reset_registry, set_registry
from rlctl.trainer.worker.training_worker import TrainingWorker

EVENTS: list[str] = []


class RecordingEngine(HFRolloutEngine):
    """The hf engine, recording generation, release, resume and weight syncs in order."""

    released: set[str]

    def memory_release(self) -> MemoryRelease:
        return MemoryRelease(True, "a recording engine")

    def release_memory(self, *, timeout_s: float) -> None:
        assert timeout_s > 0
        self.released = set(MEMORY_PARTS)
        EVENTS.append("release")

    def resume_memory(self, parts: Sequence[MemoryPart] = MEMORY_PARTS, *,
                      timeout_s: float) -> None:
        for part in parts:
            if part in getattr(self, "released", set()):
                self.released.discard(part)
                EVENTS.append(f"resume {part}")

    async def generate_many(self, prompts: Any, sampling: Any) -> Any:
        assert not getattr(self, "released", set()), "generated on a released engine"
        if not EVENTS or EVENTS[-1] != "generate":
            EVENTS.append("generate")
        return await super().generate_many(prompts, sampling)

    def update_weights(self, state_dict: Any, version: int) -> None:
        assert "weights" not in getattr(self, "released", set()), "synced into released weights"
        EVENTS.append("sync")
        super().update_weights(state_dict, version)


class RecordingPlugin:
    @hookimpl
    def register_rollout_engines(self, register) -> None:  # type: ignore[no-untyped-def]
        from rlctl.engines.rollout.hf.options import HFRolloutOptions

        register("recording", f"{__name__}:RecordingEngine", weight_sync="in_process",
                 options=HFRolloutOptions,
                 memory_release=True, description="hf, recording memory release")


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    EVENTS.clear()
    update = TrainingWorker.update_actor

    @functools.wraps(update)  # dispatched by name
    def recorded_update(self: TrainingWorker, *args: Any, **kwargs: Any) -> Any:
        EVENTS.append("update_actor")
        return update(self, *args, **kwargs)

    monkeypatch.setattr(TrainingWorker, "update_actor", recorded_update)
    set_registry(build_registry(external="none", extra=[RecordingPlugin()]))
    yield EVENTS
    reset_registry()


def _recipe(make_recipe: Any, **patch: Any) -> Any:
    return make_recipe(run={"device": "auto"}, schedule={"total_steps": 2},
                       engines={"rollout": {"backend": "recording", **patch.pop("rollout", {})}},
                       **patch)


def test_release_after_generating_resume_weights_before_the_sync_kv_after(
        make_recipe, run, recorded):
    rows = run(_recipe(make_recipe))
    step = ["generate", "release", "update_actor", "resume weights", "sync", "resume kv_cache"]
    assert recorded == ["sync"] + step + step  # the session's first sync: nothing released
    assert [r["rollout/memory_released"] for r in rows] == [1.0, 1.0]
    assert all(r["timing_s/release_memory"] >= 0 for r in rows)


def test_nothing_is_released_when_the_recipe_turns_it_off(make_recipe, run, recorded):
    rows = run(_recipe(make_recipe, rollout={"release_memory": False}))
    assert "release" not in recorded and recorded.count("sync") == 3  # the first, two steps
    assert "rollout/memory_released" not in rows[-1]


def test_nothing_is_released_while_streaming(make_recipe, run, recorded):
    # generation of the next step runs while this one trains: the rollout keeps its memory
    rows = run(_recipe(make_recipe, algorithm={"staleness": {
        "policy": "bounded", "options": {"max_staleness": 1}}}))
    assert "release" not in recorded and "generate" in recorded
    assert "rollout/memory_released" not in rows[-1]
