"""``rlctl eval RECIPE... [--model M] [--k K]``: a model's accuracy on the held-out prompts.

The recipe says what is scored (held-out split, rewards, engine, generation length); ``--model``
says which weights (default: the recipe's ``model.path``), see :mod:`rlctl.evals.model_source`.
The table goes to stdout (``--json``: one JSON object instead); ``--out FILE`` also writes the
JSON to a new file. No torch import before the recipe has validated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rlctl.cli.common import EXIT_RUN_FAILURE, EXIT_USAGE, RecipeArgs, SetOption, fail, load_or_exit
from rlctl.hookspecs import hookimpl


def eval_command(
    recipes: RecipeArgs,
    overrides: SetOption = None,
    model: Annotated[
        str | None,
        typer.Option(help="Weights to score: a catalog name, an HF directory, a run directory "
                     "or a checkpoint (default: the recipe's model.path).", show_default=False),
    ] = None,
    k: Annotated[int, typer.Option(min=0, help="Sampled responses per prompt for mean@k and "
                                   "pass@k (0: the greedy pass@1 only).")] = 0,
    temperature: Annotated[
        float | None,
        typer.Option(min=0.0, help="Temperature of the k sampled responses (default: the "
                     "recipe's rollout.temperature).", show_default=False),
    ] = None,
    prompts: Annotated[
        int | None,
        typer.Option(min=1, help="Held-out prompts to score (default: data.val_size).",
                     show_default=False),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    out: Annotated[
        Path | None,
        typer.Option(help="Also write the JSON result to this new file.", dir_okay=False,
                     show_default=False),
    ] = None,
) -> None:
    """Score a model on the recipe's held-out prompts: pass@1 greedy, mean@k / pass@k sampled.

    95% intervals (Wilson for 0/1 values, normal otherwise). The engine is the recipe's
    [engines.rollout] backend.
    """
    if out is not None and (out.exists() or out.is_symlink()):
        fail(f"--out {out} exists", code=EXIT_USAGE, fix="name a new file (nothing is replaced)")
    loaded = load_or_exit(recipes, overrides)
    if temperature == 0 and k > 0:
        fail("--temperature 0 with --k: k greedy responses would be identical", code=EXIT_USAGE,
             fix="give a sampling temperature (> 0), or --k 0")
    from rlctl.evals.model_source import model_directory
    from rlctl.evals.runner import EvalSetupError, check_evaluable, evaluate, format_table

    label = model or loaded.recipe.model.path
    try:
        check_evaluable(loaded)
        with model_directory(label, loaded.recipe) as directory:
            result = evaluate(
                loaded, directory, k=k, prompts=prompts, model_label=label,
                temperature=loaded.recipe.rollout.temperature if temperature is None
                else temperature)
    except EvalSetupError as exc:
        fail(str(exc), code=EXIT_USAGE)
    except (OSError, ValueError) as exc:  # a model that does not load, a broken prompt file
        fail(f"evaluation failed: {exc}", code=EXIT_RUN_FAILURE)
    text = json.dumps(result.as_json(), indent=2)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    typer.echo(text if as_json else format_table(result))


@hookimpl
def register_commands(cli):  # type: ignore[no-untyped-def]
    cli.command("eval")(eval_command)
