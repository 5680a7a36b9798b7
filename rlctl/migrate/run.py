""":func:`migrate`: verl YAML + overrides -> a validated rlctl recipe, its report, or problems."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlctl.migrate.inputs import InputError, read_text
from rlctl.migrate.ledger import Ledger, Problem
from rlctl.migrate.shell import ScriptCall, ScriptError, read_script
from rlctl.migrate.translate_algorithm import (
    VerlBatch,
    translate_batch,
    translate_estimator,
    translate_kl,
    translate_loss,
)
from rlctl.migrate.translate_dapo import translate_dynamic_sampling, translate_reward_manager
from rlctl.migrate.translate_engines import (
    log_prob_micro,
    total_steps,
    translate_data,
    translate_layout,
    translate_model,
    translate_rollout,
    translate_run,
    translate_schedule,
)
from rlctl.migrate.translate_lora import translate_lora
from rlctl.migrate.translate_optim import put_optim, read_optim, translate_critic
from rlctl.migrate.translate_reward_model import reward_keys, translate_reward_model
from rlctl.migrate.verl_config import Override, VerlConfigError, load_verl_config


@dataclass
class Inputs:
    """What ``rlctl config migrate`` was given."""

    verl_yaml: Path
    overrides: Sequence[str] = ()
    """Overrides given as arguments (applied last)."""
    overrides_file: Path | None = None
    script: Path | None = None
    variables: Mapping[str, str] = field(default_factory=dict)
    """``--var NAME=VALUE``: the environment the script reads."""
    rewards: Sequence[str] = ()
    train_rows: int | None = None
    verl_version: str | None = None
    """``--verl-version``: the release whose defaults the config is compared with."""


@dataclass
class Migration:
    """The outcome: a ledger (every key's fate), the recipe, or the problems."""

    inputs: Inputs
    ledger: Ledger | None
    call: ScriptCall | None
    overrides: list[Override]
    verl_batch: VerlBatch | None = None
    problems: list[Problem] = field(default_factory=list)
    input_error: str | None = None
    """An input that cannot be read as what it should be (one line; nothing else is done)."""

    @property
    def recipe(self) -> dict[str, Any]:
        return self.ledger.recipe if self.ledger is not None else {}


def gather_overrides(inputs: Inputs) -> tuple[list[Override], ScriptCall | None, list[Problem]]:
    """Script overrides, then the file's, then the arguments (later ones win, as in Hydra).

    Raises :class:`ScriptError` / :class:`InputError` for a script or file that cannot be read.
    """
    out: list[Override] = []
    problems: list[Problem] = []
    call = None
    if inputs.script is not None:
        call = read_script(inputs.script, inputs.variables)
        problems += [_unresolved(call, name, uses) for name, uses in call.unresolved.items()]
        name = Path(inputs.script).name
        out += [Override(o, name) for o in call.overrides]
    if inputs.overrides_file is not None:
        lines = read_text(Path(inputs.overrides_file), "overrides file").splitlines()
        for number, line in enumerate(lines, start=1):
            text = line.strip()
            if text and not text.startswith("#"):
                out.append(Override(text, f"{Path(inputs.overrides_file).name}:{number}"))
    out += [Override(o, "argument") for o in inputs.overrides]
    return out, call, problems


def _unresolved(call: ScriptCall, name: str, uses: tuple[str, ...]) -> Problem:
    """A script variable nothing set: which overrides need it, and how to give it."""
    where = "; ".join(uses[:2]) + (" ..." if len(uses) > 2 else "")
    if not name.startswith(("$", "`")):
        branch = call.branches.get(name)
        why = (f"the script branches on it ({branch}) and sets what these use differently"
               if branch else "shell variable not set by the script")
        return Problem(f"${name}", f"{why} (used in: {where})",
                       f"pass --var {name}=VALUE (the migration never guesses it)")
    # a $(command) in a variable's default: setting the variable skips it
    owners = [v for v, default in call.defaults_taken.items() if name in default]
    fix = (f"pass --var {owners[0]}=VALUE (its default runs {name})" if owners
           else "replace the command substitution with its value in an override")
    return Problem(name, f"a command the migration does not run (used in: {where})", fix)


def _registry_names() -> dict[str, list[str]]:
    from rlctl.registry import get_registry

    reg = get_registry()
    return {k: reg.names(k) for k in ("advantage_estimator", "policy_loss", "reward_function")}


def migrate(inputs: Inputs) -> Migration:
    """Run every translator; the result has problems, or a recipe for every key accounted."""
    try:
        overrides, call, problems = gather_overrides(inputs)
    except (ScriptError, InputError) as exc:
        return Migration(inputs, None, None, [], input_error=str(exc))
    migration = Migration(inputs, None, call, overrides, problems=problems)
    if problems:
        return migration
    try:
        cfg = load_verl_config(inputs.verl_yaml, overrides, config_name=_config_name(call),
                               verl_version=inputs.verl_version)
    except VerlConfigError as exc:
        migration.input_error = str(exc)
        return migration
    lg = Ledger(cfg)
    migration.ledger = lg
    names = _registry_names()
    layout = translate_layout(lg)
    estimator = translate_estimator(lg, names["advantage_estimator"])
    batch = translate_batch(lg, layout.world, layout.model_parallel) if layout else None
    migration.verl_batch = batch
    translate_loss(lg, names["policy_loss"])
    translate_kl(lg)
    steps = total_steps(lg, inputs.train_rows if inputs.train_rows is not None
                        else _count_rows(lg), lg.value("data.train_batch_size"))
    opt_steps = batch.minibatches * batch.epochs if batch else 1
    clip_key = ("actor_rollout_ref.actor.grad_clip"
                if "actor_rollout_ref.actor.grad_clip" in cfg else
                "actor_rollout_ref.actor.optim.clip_grad")
    if clip_key.endswith(".grad_clip"):
        _clip_agrees(lg)
    actor = read_optim(lg, "actor_rollout_ref.actor.optim", clip_key, steps, opt_steps)
    put_optim(lg, actor)
    translate_critic(lg, estimator, actor, steps, opt_steps)
    if layout is not None:
        translate_rollout(lg, layout)
        log_prob_micro(lg, batch.data_parallel_size if batch else layout.world)
    translate_model(lg)
    translate_lora(lg)
    reward = reward_keys(lg)
    reward_model = translate_reward_model(lg, reward)
    translate_data(lg, list(inputs.rewards), names["reward_function"], reward_model, reward.custom)
    translate_reward_manager(lg, reward_model is not None, reward)
    translate_dynamic_sampling(lg, list(inputs.rewards), reward_model is not None)
    translate_schedule(lg, steps)
    translate_run(lg, layout.backend if layout else None)
    from rlctl.migrate.rules import apply_rules

    apply_rules(lg)
    migration.problems += lg.problems
    return migration


def _clip_agrees(lg: Ledger) -> None:
    """verl's FSDP actor clips with actor.grad_clip; its newer engine with optim.clip_grad."""
    legacy, new = "actor_rollout_ref.actor.grad_clip", "actor_rollout_ref.actor.optim.clip_grad"
    if lg.value(legacy) == lg.value(new):
        lg.drop(new, "same as actor.grad_clip")
    else:
        lg.error(new, f"{lg.value(new)!r} but actor.grad_clip is {lg.value(legacy)!r}: verl's "
                 "FSDP workers use one or the other depending on the worker implementation",
                 "set both to the same value")


def _config_name(call: ScriptCall | None) -> str | None:
    if call is None:
        return None
    return call.hydra_flags.get("--config-name") or call.hydra_flags.get("-cn")


def _count_rows(lg: Ledger) -> int | None:
    """Rows of the training files when they are here to count (parquet metadata, JSONL lines);
    None when any is missing or unreadable (then --train-rows is asked for)."""
    files = lg.value("data.train_files")
    files = [files] if isinstance(files, str) else list(files or [])
    total = 0
    for name in files:
        path = Path(str(name)).expanduser()
        rows = _rows_in(path) if path.is_file() else None
        if rows is None:
            return None
        total += rows
    return total if files else None


def _rows_in(path: Path) -> int | None:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
            from pyarrow import ArrowException
        except ImportError:
            return None
        try:
            return pq.ParquetFile(path).metadata.num_rows
        except (ArrowException, OSError):
            return None
    if path.suffix == ".jsonl":
        try:
            with path.open(encoding="utf-8") as fh:
                return sum(1 for line in fh if line.strip())
        except (OSError, UnicodeDecodeError):
            return None
    return None
