"""What ``rlctl train`` checks after the recipe validates and before anything starts.

The recipe itself is valid by now; these checks need the world outside it: the data files,
the tokenizer, the checkpoint to resume from. Each used to fail only once Ray and the
workers were up (about 15 s in, exit 1, a half-written run directory). Here they fail
first, with nothing started and nothing written:

* a bad input (data file, prompt lengths, no checkpoint to resume, a resume whose math
  differs from the checkpoint's) raises :class:`ConfigError`: exit 2 with key paths;
* a checkpoint that is marked complete but whose files do not match raises
  :class:`~rlctl.checkpoint.CheckpointDamaged`: exit 1, naming the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from rlctl.config.problems import ConfigError, ConfigProblem
from rlctl.config.recipe import Recipe

RESUME = "--resume"


@dataclass
class Checked:
    """The outcome of :func:`preflight` when the run may start."""

    checkpoint: Path | None = None
    """The complete, intact checkpoint to resume from; ``None`` for a fresh run."""
    notes: list[str] = field(default_factory=list)
    """What the user should know (e.g. which checkpoint ``latest`` fell back to)."""


def preflight(recipe: Recipe, *, resume: str | bool | None, force_resume: bool = False) -> Checked:
    """Check data, prompt lengths and the checkpoint to resume; see the module docstring."""
    problems = model_problems(recipe)
    broken = {p.path for p in problems}  # a model dir already refused: no tokenizer problem too
    problems += [p for p in data_problems(recipe) if p.path not in broken]
    checked = Checked()
    if resume:
        path = None if resume is True or resume == "latest" else str(resume)
        checkpoint, notes, resume_problems = _resolve(recipe, path)
        checked.notes += notes
        problems += resume_problems
        if checkpoint is not None:
            from rlctl.checkpoint import CheckpointDamaged
            from rlctl.checkpoint.verify import verify_checkpoint

            try:
                verify_checkpoint(checkpoint)  # CheckpointDamaged: exit 1, not a recipe problem
            except CheckpointDamaged as exc:
                exc.checkpoint = checkpoint
                raise
            if not force_resume:
                problems += _compat_problems(recipe, checkpoint)
            checked.checkpoint = checkpoint
    if problems:
        raise ConfigError(problems)
    return checked


def catalog_problems(recipe: Recipe) -> list[ConfigProblem]:
    """Catalog models (``rlctl models list``) the recipe names but this machine lacks."""
    from rlctl.models.catalog import ModelNotInstalledError, install_command, resolve_model_path

    out = []
    for key, value in (("model.path", recipe.model.path), ("model.tokenizer",
                       recipe.model.tokenizer), ("critic.path", recipe.critic.path)):
        try:
            if value is not None:
                resolve_model_path(value)
        except ModelNotInstalledError as exc:
            out.append(ConfigProblem(key, str(exc).split(": run")[0],
                                     f"run `{install_command(value)}` (once per machine)"))
    return out


def data_problems(recipe: Recipe) -> list[ConfigProblem]:
    """Data files, then (when they are fine) every prompt's length in tokens."""
    from rlctl.tasks.data_checks import data_file_problems, prompt_length_problems

    data = recipe.data
    if data.train is None and data.val is None:
        return []
    problems = data_file_problems(data)
    if problems:
        return problems
    tokenizer, problems = _tokenizer(recipe)
    if tokenizer is None:
        return problems
    return prompt_length_problems(recipe, tokenizer)


def model_problems(recipe: Recipe) -> list[ConfigProblem]:
    """What the models a recipe names must allow: room for a prompt next to
    ``rollout.max_new_tokens`` in the policy's positions, and the local directories plugin
    options name (a reward model's checkpoint...)."""
    from rlctl.models.loading import model_dir_problems
    from rlctl.tasks.data_checks import model_positions

    missing = catalog_problems(recipe)
    if missing:
        return missing
    broken = model_dir_problems(recipe.model)
    if broken:
        return [ConfigProblem(key, why, "give the local directory of a model rlctl can load")
                for key, why in broken]
    out: list[ConfigProblem] = []
    positions, where = model_positions(recipe)
    new = recipe.rollout.max_new_tokens
    if positions is not None and new >= positions:
        fix = f"set rollout.max_new_tokens below {positions} (prompt + response must fit)"
        if where.startswith("model."):
            fix += f", or raise {where}"
        out.append(ConfigProblem(
            "rollout.max_new_tokens", f"{new} new tokens leave no room for a prompt in the "
            f"model's {positions} positions ({where})", fix))
    return out + local_dir_problems(recipe)


def local_dir_problems(recipe: Recipe) -> list[ConfigProblem]:
    """Plugin options that name a local directory (:data:`~rlctl.config.strict.LocalDir`, e.g.
    a reward model's ``path``) which is not there."""
    from rlctl.config.plugin_options import check_selections
    from rlctl.config.strict import local_dir_fields
    from rlctl.registry import get_registry

    validated, _ = check_selections(recipe, get_registry())  # the recipe validated already
    out: list[ConfigProblem] = []
    for path, options in validated.items():
        for name, value in local_dir_fields(options):
            if not Path(value).expanduser().is_dir():
                out.append(ConfigProblem(
                    f"{path}.{name}", f"{json.dumps(value)} is not a local directory",
                    "give the directory of a downloaded checkpoint (rlctl never downloads "
                    f"weights; working directory: {Path.cwd()})"))
    return out


def _tokenizer(recipe: Recipe) -> tuple[object | None, list[ConfigProblem]]:
    from rlctl.models.loading import load_tokenizer

    model = recipe.model
    key = "model.tokenizer" if model.tokenizer else "model.path"
    try:
        return load_tokenizer(model), []
    except (OSError, ValueError) as exc:  # FileNotFoundError with the fix, or a broken dir
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, [ConfigProblem(key, f"cannot load the tokenizer: {text}",
                                    "give a local directory with the tokenizer files")]


def _resolve(
    recipe: Recipe, path: str | None
) -> tuple[Path | None, list[str], list[ConfigProblem]]:
    from rlctl.checkpoint import CheckpointError, CheckpointManager
    from rlctl.checkpoint.manager import CHECKPOINTS_DIR
    from rlctl.run.run_lock import still_training, training_run

    run_dir = Path(recipe.run.output_dir) / recipe.run.name
    manager = CheckpointManager(run_dir, keep_last=recipe.schedule.keep_last)
    source = RESUME if path is None else f"{RESUME} {path}"
    # first: a checkpoint of a run in progress may be rotated away while it is read, which
    # looked like a damaged checkpoint
    busy = training_run(run_dir if path is None else Path(path))
    if busy is not None:
        return None, [], [ConfigProblem("", still_training(*busy),
                                        "resume once that run has stopped", source=source)]
    try:
        checkpoint = manager.resolve(path)
    except CheckpointError as exc:
        message, _, _ = str(exc).removeprefix(f"{source}: ").partition("; run without")
        fix = ("run without --resume to start afresh, or give --resume PATH to a checkpoint "
               "directory")
        return None, [], [ConfigProblem("", message, fix, source=source)]
    # a run or checkpoints directory resolves through its latest pointer: say if it fell back
    if path is None:
        owner = manager
    else:
        given = Path(path)
        root = given if given.name == CHECKPOINTS_DIR else given / CHECKPOINTS_DIR
        owner = CheckpointManager(root.parent) if checkpoint.parent == root else None
    note = owner.fallback_note() if owner is not None else None
    notes = [f"note: {note}"] if note else []
    notes.append(f"resuming from {checkpoint}")
    return checkpoint, notes, []


def _compat_problems(recipe: Recipe, checkpoint: Path) -> list[ConfigProblem]:
    from rlctl.checkpoint import CheckpointDamaged, diff_configs, load_config_snapshot
    from rlctl.checkpoint.config_compat import lookup
    from rlctl.run.checkpointing import resolved_config

    try:
        saved = load_config_snapshot(checkpoint)
    except FileNotFoundError as exc:
        raise CheckpointDamaged(str(exc)) from None
    new = resolved_config(recipe)
    return [
        ConfigProblem(
            key, f"the checkpoint was trained with {json.dumps(lookup(saved, key))}, this "
            f"recipe says {json.dumps(lookup(new, key))}: that changes the training math",
            "resume with the checkpoint's value, or pass --force-resume to continue with the "
            "new one", source=f"{RESUME} {checkpoint}")
        for key in diff_configs(saved, new)
    ]
