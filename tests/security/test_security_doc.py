"""docs/security.md stays true to the code it describes."""

from __future__ import annotations

from pathlib import Path

from rlctl.config.recipe import ScheduleSection
from rlctl.engines.rollout.server.options import LOADER_ENV, ServerOptions
from rlctl.trainer.controller import worker_group

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_page_is_linked_and_has_its_sections():
    text = (DOCS / "security.md").read_text(encoding="utf-8")
    assert "](security.md)" in (DOCS / "index.md").read_text(encoding="utf-8")
    for heading in ("## What binds where", "## Ray: private directory, token authentication",
                    "## Trusted input", "## Checkpoints"):
        assert heading in text
    assert "allow-listed unpickler" in text.split("## Checkpoints", 1)[1]


def test_the_names_it_uses_exist():
    text = (DOCS / "security.md").read_text(encoding="utf-8")
    assert "allow_loader_env" in text and "allow_loader_env" in ServerOptions.model_fields
    named = [v for v in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONWARNINGS",
                         "PYTHONBREAKPOINT", "BASH_ENV") if f"`{v}`" in text]
    assert named and set(named) <= LOADER_ENV
    assert "rlctl-ray-<uid>" in text and "rlctl/run/ray_address.py" in text


def test_the_trainer_page_states_the_bounds_the_code_has():
    text = (DOCS / "trainer.md").read_text(encoding="utf-8")
    for key in ("phase_timeout_s", "start_timeout_s", "liveness_timeout_s"):
        assert f"schedule.{key}" in text and key in ScheduleSection.model_fields
    assert f"{worker_group.LIVENESS_TIMEOUT_S:.0f} s" in text
