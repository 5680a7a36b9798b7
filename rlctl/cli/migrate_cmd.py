"""``rlctl config migrate``: a verl config and its launch overrides -> an rlctl recipe + report.

The recipe is validated with ``rlctl config validate``'s own loader before anything is
written; on any problem nothing is written and the command exits 2 naming each verl key.
Existing files are never overwritten without ``--force``.
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from rlctl.cli.common import EXIT_USAGE, fail, say

VerlYaml = Annotated[Path, typer.Argument(
    help="verl's composed trainer config: verl/trainer/config/_generated_ppo_trainer.yaml "
    "(or _generated_ppo_megatron_trainer.yaml, or `main_ppo --cfg job` output).",
    metavar="VERL_YAML", show_default=False)]
OverrideArgs = Annotated[list[str] | None, typer.Argument(
    help="Hydra overrides as verl takes them (key=value, +key=value, ~key); applied after "
    "the script's and the file's.", metavar="OVERRIDE", show_default=False)]


def _pairs(items: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        name, eq, value = item.partition("=")
        if not eq or not name:
            fail(f"{option} {item!r} is not NAME=VALUE", code=EXIT_USAGE,
                 fix=f"write {option} NAME=VALUE")
        out[name] = value
    return out


def _refuse_existing(path: Path | None, force: bool) -> None:
    if path is not None and path.exists() and not force:
        fail(f"{path} exists; migrate writes only new files", code=EXIT_USAGE,
             fix="choose another path, or pass --force to replace it")


def migrate(
    verl_yaml: VerlYaml,
    overrides: OverrideArgs = None,
    output: Annotated[Path, typer.Option(
        "--output", "-o", help="The recipe to write (TOML).", show_default=False)] = ...,  # type: ignore[assignment]
    overrides_file: Annotated[Path | None, typer.Option(
        "--overrides-file", help="More overrides, one a line (# comments allowed).")] = None,
    verl_script: Annotated[Path | None, typer.Option(
        "--verl-script", help="A launch script: the arguments of its verl.trainer.main_ppo "
        "call are the first overrides.")] = None,
    var: Annotated[list[str] | None, typer.Option(
        "--var", help="NAME=VALUE: an environment variable the script reads (e.g. HOME); "
        "unset ones are reported, never guessed.", metavar="NAME=VALUE")] = None,
    reward: Annotated[list[str] | None, typer.Option(
        "--reward", help="Registered reward function that scores the data (verl picks its "
        "built-in one per data_source; rlctl needs it named).", metavar="NAME")] = None,
    train_rows: Annotated[int | None, typer.Option(
        "--train-rows", min=1, help="Rows of the training set, for trainer.total_epochs -> "
        "schedule.total_steps (counted from the files when they are here).")] = None,
    verl_version: Annotated[str | None, typer.Option(
        "--verl-version", help="The verl release the config comes from (its defaults are not "
        "your settings): v0.7.0, v0.7.1, v0.8.0, v0.9.0 or main; detected from VERL_YAML when "
        "not given.", metavar="RELEASE")] = None,
    report: Annotated[Path | None, typer.Option(
        "--report", help="Also write the full report (every key by name) to this file.")] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="List the keys at verl's default one by one too.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace existing output files.")] = False,
) -> None:
    """Turn a verl config plus the overrides of its launch script into an rlctl recipe.

    Prints a report of what you set (in the script, the overrides or your YAML): mapped (to
    which rlctl key), with no effect here (and why), or refused (why, and the fix); keys at
    verl's default are counted (--verbose lists them) and never refused. Exit 2, writing
    nothing, when a setting cannot be migrated faithfully or a script variable is unset.
    """
    from rlctl.migrate.report import render_report
    from rlctl.migrate.run import Inputs
    from rlctl.migrate.run import migrate as run_migration

    _refuse_existing(output, force)
    _refuse_existing(report, force)
    inputs = Inputs(verl_yaml=verl_yaml, overrides=list(overrides or []),
                    overrides_file=overrides_file, script=verl_script,
                    variables=_pairs(var, "--var"), rewards=list(reward or []),
                    train_rows=train_rows, verl_version=verl_version)
    result = run_migration(inputs)
    if result.input_error is not None:  # unreadable or malformed input: one line, nothing else
        fail(result.input_error, code=EXIT_USAGE)
    text = None
    derived = None
    if not result.problems:
        text, derived = _render_and_validate(result, output)
    typer.echo(render_report(result, rlctl_derived=derived, full=verbose), nl=False)
    if result.problems or text is None:
        n = len(result.problems)
        say(f"error: cannot migrate faithfully ({n} problem{'s' if n != 1 else ''}); "
            "nothing written:")
        for problem in result.problems:
            say("  " + problem.render().replace("\n", "\n  "))
        raise typer.Exit(EXIT_USAGE)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
        say(f"wrote {output}")
        if report is not None:
            report.write_text(render_report(result, rlctl_derived=derived, full=True),
                              encoding="utf-8")
            say(f"wrote {report}")
    except OSError as exc:
        fail(
            f"cannot write: {exc}", code=EXIT_USAGE, fix="choose a writable path for -o / --report"
        )


def _summary(result) -> str:  # type: ignore[no-untyped-def]
    lg = result.ledger
    est = lg.value("algorithm.adv_estimator")
    world = lg.value("trainer.nnodes") * lg.value("trainer.n_gpus_per_node")
    return (f"{est} on {lg.value('actor_rollout_ref.model.path')}, "
            f"{lg.value('actor_rollout_ref.actor.strategy')} training + "
            f"{lg.value('actor_rollout_ref.rollout.name')} rollout on {world} GPUs")


def _command(inputs, output: Path) -> list[str]:  # type: ignore[no-untyped-def]
    """The migrate command line that makes this recipe again (written into its header)."""
    words = ["rlctl", "config", "migrate", str(inputs.verl_yaml)]
    words += [shlex.quote(o) for o in inputs.overrides]
    if inputs.overrides_file is not None:
        words += ["--overrides-file", str(inputs.overrides_file)]
    if inputs.script is not None:
        words += ["--verl-script", str(inputs.script)]
    words += [f"--var {shlex.quote(f'{k}={v}')}" for k, v in inputs.variables.items()]
    words += [f"--reward {r}" for r in inputs.rewards]
    if inputs.train_rows is not None:
        words += [f"--train-rows {inputs.train_rows}"]
    if inputs.verl_version is not None:
        words += [f"--verl-version {inputs.verl_version}"]
    return [*words, "-o", str(output)]


def _render_and_validate(result, output: Path):  # type: ignore[no-untyped-def]
    """The recipe text and its derived numbers, or problems added to ``result``."""
    from rlctl.config.pipeline import load_recipe
    from rlctl.config.problems import ConfigError
    from rlctl.migrate.ledger import Problem
    from rlctl.migrate.write import render_recipe

    text = render_recipe(result.recipe, result.ledger.comments, out_name=str(output),
                         command=_command(result.inputs, output), summary=_summary(result))
    with tempfile.TemporaryDirectory(prefix="rlctl-migrate-") as tmp:
        path = Path(tmp) / output.name
        path.write_text(text, encoding="utf-8")
        try:
            loaded = load_recipe([path], env={})
        except ConfigError as exc:
            for p in exc.problems:  # a migration bug or a combination rlctl refuses
                result.problems.append(Problem(f"rlctl {p.path}", p.message, p.fix))
            return None, None
    derived = loaded.derived.as_dict()
    verl = result.verl_batch.as_dict() if result.verl_batch else {}
    # global numbers must agree exactly; per-rank ones too unless a parallel layout was ignored
    keys = ["samples_per_step", "prompts_per_minibatch", "minibatch_size",
            "optimizer_steps_per_train_step"]
    if verl.get("data_parallel_size") == derived["data_parallel_size"]:
        keys += ["minibatch_size_per_rank", "micro_batches_per_rank"]
    for key in keys:
        if verl.get(key) != derived[key]:
            result.problems.append(Problem(
                f"derived {key}", f"verl uses {verl.get(key)}, the migrated recipe gives "
                f"{derived[key]}", "a bug in rlctl config migrate: please report it"))
    return (None, derived) if result.problems else (text, derived)
