"""``rlctl train``: from a validated recipe to a finished run directory.

The run directory ``<output_dir>/<name>/`` holds the resolved config (``config.toml``),
plugin versions and git revision (``run_info.json``) and ``metrics.jsonl``. A run locks it
and changes nothing in it until the run is known to start (:mod:`rlctl.run.run_dir`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlctl.config.loaded import LoadedRecipe
from rlctl.config.recipe import Recipe

if TYPE_CHECKING:  # the run's parts import torch and Ray: only when a run starts
    from rlctl.run.checkpointing import RunCheckpoints
    from rlctl.run.lifecycle import LifecycleHooks
    from rlctl.run.session import Session
    from rlctl.run.summary import RunSummary
    from rlctl.sinks.logger import MetricLogger


def train_from_recipe(
    loaded: LoadedRecipe | Recipe,
    *,
    quiet: bool = False,
    resume: str | bool | None = None,
    force_resume: bool = False,
) -> int:
    """Run training; returns the process exit code (0 ok, 1 run failure).

    ``loaded`` comes from :func:`rlctl.config.pipeline.load_recipe` (``--local`` is already in
    it: ``resources.mode = "local"`` with one rank per role); a :class:`Recipe` built in code
    is validated with :func:`rlctl.config.pipeline.validate_recipe` first. ``resume``: ``True``
    or ``"latest"`` resumes from the run's latest checkpoint, a path from that checkpoint;
    ``force_resume`` accepts a config that differs in the math.
    """
    from rich.console import Console
    from rich.markup import escape

    err = Console(stderr=True, soft_wrap=True)  # error text must stay greppable: no wrapping
    if isinstance(loaded, Recipe):
        from rlctl.config.pipeline import validate_recipe

        loaded = validate_recipe(loaded)
    from rlctl.run.run_dir import RunDirError
    from rlctl.run.run_lock import RunLockedError
    from rlctl.run.signals import EXIT_TERMINATED, StopOnSigterm

    # Messages hold user text (paths, TOML keys like "[data]"): escape it, or rich reads it
    # as markup, drops it, or fails on a "[/x]" with an error that hides the real one.
    with StopOnSigterm() as stop:
        try:
            run = Run(loaded, quiet=quiet, resume=resume, force_resume=force_resume)
            run.execute()
        except KeyboardInterrupt:
            # Ray's core turns a signal that lands inside ray.get into a KeyboardInterrupt of
            # its own: whether SIGTERM came is what the handler recorded, not the class.
            if stop.received:
                err.print("[red]terminated[/red]")
                return EXIT_TERMINATED
            err.print("[red]interrupted[/red]")
            return 1
        except (RunDirError, RunLockedError) as exc:
            err.print(f"[red]error:[/red] {escape(str(exc))}")
            return 2  # the CLI's usage error: nothing started, nothing changed
        except Exception as exc:  # noqa: BLE001 -- the run failed: say why once, no traceback wall
            if stop.received:  # e.g. a worker that got the same SIGTERM died first
                err.print("[red]terminated[/red]")
                return EXIT_TERMINATED
            err.print(f"[red]training failed:[/red] {type(exc).__name__}: {escape(str(exc))}")
            if "--debug" in sys.argv or _env_flag("RLCTL_DEBUG"):
                err.print_exception()
            return 1
    return 0


class Run:
    """One training run: its directory, its session and its step loop."""

    def __init__(
        self,
        loaded: LoadedRecipe,
        *,
        quiet: bool,
        resume: str | bool | None = None,
        force_resume: bool = False,
    ) -> None:
        self.loaded = loaded
        self.recipe = recipe = loaded.recipe
        self.derived = loaded.derived
        self.quiet = quiet
        self.resume = resume
        self.force_resume = force_resume
        self.run_dir = Path(recipe.run.output_dir) / recipe.run.name

    @property
    def resume_path(self) -> str | None:
        if self.resume in (None, False, True, "latest", ""):
            return None
        return str(self.resume)

    @property
    def continues_this_run(self) -> bool:
        """A resume from this run directory's own checkpoints (not from another run's)."""
        if not self.resume:
            return False
        if self.resume_path is None:
            return True
        here, source = self.run_dir.resolve(), Path(self.resume_path).resolve()
        return source == here or here in source.parents

    def write_run_info(self) -> None:
        """``config.toml`` and ``run_info.json``; called once the run is known to start."""
        import tomli_w

        from rlctl.checkpoint.atomic import atomic_write_text
        from rlctl.registry import get_registry

        resolved = self.recipe.model_dump(mode="json", by_alias=True, exclude_none=True)
        atomic_write_text(self.run_dir / "config.toml", tomli_w.dumps(resolved))
        registry = get_registry()
        info = {
            "rlctl_version": _version(),
            "git_revision": _git_revision(),
            "plugins": [
                {"name": p.name, "distribution": p.distribution, "version": p.version}
                for p in registry.plugins
            ],
            "derived": self.derived.as_dict(),
            "started": time.time(),
        }
        atomic_write_text(self.run_dir / "run_info.json", json.dumps(info, indent=2))

    def write_placement(self, session: Any) -> None:
        """``placement.json`` (every worker's seat and what its process reports) and one
        line per worker on stderr; nothing in ``--local`` (one process)."""
        from rlctl.checkpoint.atomic import atomic_write_text

        rows = session.whereabouts()
        if not rows:
            return
        atomic_write_text(self.run_dir / "placement.json", json.dumps(rows, indent=2))
        if self.quiet:
            return
        from rich.markup import escape

        from rlctl.sinks.console import console_for

        for row in rows:
            seen = row["reported"]
            devices = ",".join(row["devices"]) or "-"
            console_for("stderr").print(escape(
                f"placed: {row['role']} {row['rank']} on {row['node_address']} "
                f"({seen['host']}, pid {seen['pid']}), {row['resource']} {devices}"
                + (f" (share {row['share']:g})" if row["share"] < 1 else "")),
                highlight=False, soft_wrap=True)

    def execute(self) -> None:
        from rlctl.run.run_dir import RunDirectory

        # Locked and checked before any worker starts; untouched until the run starts.
        with RunDirectory(self.run_dir, resume=self.continues_this_run) as claim:
            for note in claim.notes:
                _warn(note)
            self._execute(claim)

    def _execute(self, claim: Any) -> None:
        from rlctl.registry import get_registry
        from rlctl.run.checkpointing import RunCheckpoints
        from rlctl.run.lifecycle import LifecycleHooks
        from rlctl.run.session import Session
        from rlctl.run.summary import RunSummary
        from rlctl.sinks.logger import MetricLogger

        hooks = LifecycleHooks(get_registry())
        checkpoints = RunCheckpoints(self.recipe, self.run_dir)
        summary = RunSummary(self.run_dir)
        status = "failed"
        with Session(self.loaded, run_id=self.recipe.run.name, run_dir=self.run_dir) as session:
            start = 1
            if self.resume:
                start = checkpoints.restore(session, self.resume_path, force=self.force_resume) + 1
            # The run is known to start (workers up, checkpoint loaded): only now does the
            # run directory change.
            claim.mark_started()
            self.write_run_info()
            self.write_placement(session)
            sink_options = {name: self.loaded.options_for(f"logging.sink_options.{name}")
                            for name in self.recipe.logging.sinks}
            logger = MetricLogger.from_recipe(self.recipe, self.run_dir, quiet=self.quiet,
                                              options=sink_options)
            summary.metrics_file = self._metrics_file(sink_options.get("jsonl"))
            hooks("on_train_start", recipe=self.recipe, run_dir=str(self.run_dir))
            try:
                self._train_steps(session, start, logger, hooks, checkpoints, summary)
                summary.model = checkpoints.export_hf(session)
                status = "completed"
            finally:
                logger.close()
                hooks("on_train_end", recipe=self.recipe, run_dir=str(self.run_dir), status=status)
        # After the session: the workers and Ray are down, the wall time is the whole run's.
        summary.checkpoint = checkpoints.manager.latest()
        summary.show()

    def _train_steps(self, session: Session, start: int, logger: MetricLogger,
                     hooks: LifecycleHooks, checkpoints: RunCheckpoints,
                     summary: RunSummary) -> None:
        """Steps ``start``..``total_steps``: each is logged, checked, hooked, checkpointed."""
        from rlctl.run.finite_check import check_finite
        from rlctl.run.progress import StepProgress
        from rlctl.run.run_log import RunLog

        trainer, schedule = session.trainer, self.recipe.schedule
        run_log = RunLog(self.run_dir)
        enabled = self.recipe.logging.progress and not self.quiet
        with StepProgress(schedule.total_steps, enabled=enabled) as progress:
            progress.advance(start - 1, {})
            if schedule.eval_every and start == 1:  # the curve starts at the base model
                logger.log(0, trainer.validate(0))
            for step in range(start, schedule.total_steps + 1):
                metrics = trainer.step(step)
                last = step == schedule.total_steps
                if schedule.eval_every and (step % schedule.eval_every == 0 or last):
                    metrics.update(trainer.validate(step))
                logger.log(step, metrics)
                for note in trainer.notes:  # e.g. a tool that raised, once a step
                    run_log.warn(note, step=step)
                summary.record(step, metrics)
                # Logged first (the user sees the NaNs), then stopped: hooks and the
                # checkpoint below never see weights a non-finite loss or score stepped on.
                check_finite(step, metrics)
                hooks("on_step_end", step=step, metrics=metrics)
                if schedule.save_every and (step % schedule.save_every == 0 or last):
                    checkpoints.save(session, step)
                progress.advance(step, metrics)

    def _metrics_file(self, jsonl_options: Any) -> Path | None:
        """``<run_dir>/metrics.jsonl`` (its configured name) when the ``jsonl`` sink is on."""
        from rlctl.sinks.options import JsonlSinkOptions

        if "jsonl" not in self.recipe.logging.sinks:
            return None
        if isinstance(jsonl_options, JsonlSinkOptions):
            return self.run_dir / jsonl_options.filename
        return self.run_dir / JsonlSinkOptions().filename


def _warn(message: str) -> None:
    from rich.markup import escape

    from rlctl.sinks.console import console_for

    console_for("stderr").print(f"[yellow]warning:[/yellow] {escape(message)}", soft_wrap=True)


def _version() -> str:
    from rlctl import __version__

    return __version__


def _git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def _env_flag(name: str) -> bool:
    import os

    return os.environ.get(name, "").lower() in ("1", "true", "yes")
