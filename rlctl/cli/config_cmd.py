"""``rlctl config validate | show | schema | migrate``."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from rlctl.cli.common import EXIT_USAGE, RecipeArgs, SetOption, load_or_exit, say
from rlctl.cli.migrate_cmd import migrate

config_app = typer.Typer(
    name="config",
    help="Validate, show and describe recipes; migrate verl configs.",
    no_args_is_help=True,
)


class Format(str, Enum):
    toml = "toml"
    json = "json"


def summary(loaded) -> str:  # type: ignore[no-untyped-def]
    """One line: what the recipe trains and how."""
    r, d = loaded.recipe, loaded.derived
    data = f"task {r.data.task}" if r.data.task else f"data {r.data.train}"
    return (
        f"{r.run.name}: {r.algorithm.estimator} on {r.model.path} ({data}), "
        f"{r.algorithm.prompts_per_step} prompts x {r.algorithm.group_size} = "
        f"{d.samples_per_step} samples/step, {d.optimizer_steps_per_train_step} optimizer "
        f"step{'s' if d.optimizer_steps_per_train_step != 1 else ''}/step, "
        f"{r.engines.train.backend} x{r.engines.train.ranks}"
        f"{f' (LoRA rank {r.model.lora.rank})' if r.model.lora.enabled else ''} + "
        f"{r.engines.rollout.backend}, {r.data_plane.backend} data plane, "
        f"{r.schedule.total_steps} steps"
    )


@config_app.command("validate")
def validate(
    recipes: RecipeArgs,
    overrides: SetOption = None,
    skip_data: Annotated[
        bool,
        typer.Option("--skip-data", help="Do not open data.train / data.val (a recipe for "
                     "another machine, whose files are not here); `train` still checks them."),
    ] = False,
) -> None:
    """Check recipes and report every problem.

    Exit 0 with a one-line summary, or exit 2 listing each problem: its key path, what is
    wrong and how to fix it. The data files are opened too, unless --skip-data.
    """
    from rlctl.config.problems import format_problems
    from rlctl.tasks.data_checks import data_file_problems

    loaded = load_or_exit(recipes, overrides)
    # the data files too (pyarrow, no torch); prompt lengths need the tokenizer: `train` checks them
    problems = [] if skip_data else data_file_problems(loaded.recipe.data)
    if problems:
        say(format_problems(problems))
        raise typer.Exit(EXIT_USAGE)
    from rlctl.algorithms.off_policy import correction_notes
    from rlctl.trainer.plan import lora_note, plan_of

    for note in correction_notes(loaded):
        say(note)
    note = lora_note(plan_of(loaded))
    if note is not None:
        say(f"note: {note}")
    typer.echo(f"ok: {summary(loaded)}")


@config_app.command("show")
def show(
    recipes: RecipeArgs,
    overrides: SetOption = None,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="Output format.")
    ] = Format.toml,
    sources: Annotated[
        bool,
        typer.Option("--sources", help="Say where each value came from (default, file, env, -s)."),
    ] = False,
) -> None:
    """Print the resolved recipe, its derived numbers, step plan and placement.

    Defaults are filled in; the TOML output is itself a valid recipe, with the derived batch
    numbers, the step plan (what runs, and why) and the placement plan (every worker's node and
    devices, Ray mode) as trailing comments.
    """
    from rlctl.config.placement import placement_comments, placement_of
    from rlctl.registry import get_registry
    from rlctl.trainer.plan import plan_comments, plan_of

    loaded = load_or_exit(recipes, overrides)
    plan = plan_of(loaded)
    placement = None if loaded.recipe.resources.mode == "local" else placement_of(
        loaded.recipe, get_registry(), loaded.options_for("engines.rollout.options"))
    if fmt is Format.json:
        out = json.loads(loaded.to_json(with_sources=sources))
        out["plan"] = [{"what": what, "choice": choice, "why": why}
                       for what, choice, why in plan.rows()]
        out["placement"] = None if placement is None else placement.as_json()
        typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        typer.echo(loaded.to_toml(with_sources=sources) + plan_comments(plan)
                   + placement_comments(loaded.recipe, placement), nl=False)


@config_app.command("schema")
def schema(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the schema to this file instead of stdout."),
    ] = None,
) -> None:
    """Print the recipe's JSON Schema, plugin options included.

    Point a TOML language server (Taplo, tombi) at it for completion and checks.
    """
    from rlctl.config.schema import build_schema
    from rlctl.registry import get_registry

    text = json.dumps(build_schema(get_registry()), indent=2, ensure_ascii=False) + "\n"
    if output is None:
        typer.echo(text, nl=False)
        return
    output.write_text(text, encoding="utf-8")
    say(f"wrote {output}")


# listed after validate, show and schema in `rlctl config --help`
config_app.command("migrate")(migrate)
