"""Built-in commands for inspecting runs: ``rlctl report`` and ``rlctl runs list``.

Registered through the ``register_commands(cli)`` hook. matplotlib and the readers are
imported inside the command functions so that the CLI starts fast.
"""

# No `from __future__ import annotations`: typer reads these annotations at runtime and
# must see the objects defined inside register_commands.

from pathlib import Path
from typing import Any

from rlctl.hookspecs import hookimpl

DEFAULT_REPORT = Path("report.png")


@hookimpl
def register_commands(cli: Any) -> None:
    _register_export(cli)
    _register_report(cli)
    _register_runs(cli)


def _register_export(cli: Any) -> None:
    import typer

    @cli.command("export")
    def export(
        checkpoint: Path = typer.Argument(
            ...,
            help="A checkpoint directory, a run's checkpoints/ directory or a run directory "
                 "(latest).",
        ),
        output: Path = typer.Option(..., "--output", "-o", help="Directory for the HF model."),
        overwrite: bool = typer.Option(
            False, "--overwrite", help="Replace OUTPUT even if it is not an earlier rlctl export."
        ),
        merged: bool = typer.Option(
            False, "--merged", help="LoRA checkpoints: the base model with the adapter merged "
            "in, as an HF model (default: the adapter in PEFT's format)."
        ),
    ) -> None:
        """Write a checkpoint's policy in HF format (safetensors + config + tokenizer); a LoRA
        run's adapter in PEFT's format (adapter_config.json + adapter_model.safetensors), or
        with --merged the base model with the adapter merged in.

        OUTPUT must be new, empty or an earlier export (which is replaced); any other
        directory is refused unless --overwrite, and a file is always refused."""
        typer.echo(f"wrote {_export(checkpoint, output, overwrite, merged)}")


def _register_report(cli: Any) -> None:
    import typer

    @cli.command("report")
    def report(
        run_dirs: list[Path] = typer.Argument(
            ...,
            metavar="RUN_DIR",
            help="Run directories (<output_dir>/<name>); several are overlaid.",
        ),
        output: Path = typer.Option(DEFAULT_REPORT, "--output", "-o", help="PNG file to write."),
        overwrite: bool = typer.Option(
            False, "--overwrite", help="Replace OUTPUT even if it is not an earlier rlctl report."
        ),
    ) -> None:
        """Plot reward, KL, entropy, response length, step time and held-out accuracy of runs
        into a PNG, and print a short summary of each run."""
        from rlctl.inspect.report import ReportTargetError, build_report
        from rlctl.inspect.run_metrics import RunNotFoundError

        try:
            result = build_report(run_dirs, output, overwrite=overwrite)
        except (RunNotFoundError, ReportTargetError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except OSError as exc:  # e.g. no permission or no space where the PNG goes
            typer.echo(f"error: cannot write the report to {output}: {exc}", err=True)
            raise typer.Exit(1) from None
        for warning in result.warnings:
            typer.echo(f"warning: {warning}", err=True)
        typer.echo(result.text)
        typer.echo(f"wrote {result.output}")


def _register_runs(cli: Any) -> None:
    import typer

    runs_app = typer.Typer(help="List and inspect runs.", no_args_is_help=True)

    @runs_app.command("list")
    def list_command(
        output_dir: Path = typer.Argument(
            Path("runs"), help="Directory holding run directories ([run] output_dir)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print a JSON array (machine output)."),
    ) -> None:
        """List the runs under OUTPUT_DIR with their last step, reward and checkpoint."""
        import json

        from rlctl.inspect.run_metrics import list_runs

        warnings: list[str] = []
        try:
            summaries = list_runs(output_dir, warnings=warnings)
        except FileNotFoundError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        for warning in warnings:  # a run that cannot be read is named, the others still listed
            typer.echo(f"warning: {warning}", err=True)
        if as_json:
            typer.echo(json.dumps([s.to_dict() for s in summaries], indent=2))
            return
        if not summaries:
            typer.echo(f"no runs under {output_dir}", err=True)
            return
        _print_table(summaries)

    cli.add_typer(runs_app, name="runs")


def _export(checkpoint: Path, output: Path, overwrite: bool, merged: bool) -> Path:
    """``rlctl export``'s work: the exported directory, or exit 2 (bad input) / 1 (damage, the
    machine) with one line."""
    import typer

    from rlctl.checkpoint import CheckpointDamaged, CheckpointError
    from rlctl.checkpoint.export_target import ExportTargetError
    from rlctl.checkpoint.offline_export import export_checkpoint
    from rlctl.run.run_lock import still_training, training_run

    busy = training_run(checkpoint)  # first: a checkpoint may rotate away mid-read
    if busy is not None:
        typer.echo(f"error: {still_training(*busy)}", err=True)
        raise typer.Exit(2)
    try:
        return export_checkpoint(checkpoint, output, overwrite=overwrite, merged=merged)
    except CheckpointDamaged as exc:  # complete, but its files do not match: a run failure
        typer.echo(f"error: the checkpoint is damaged: {exc}", err=True)
        raise typer.Exit(1) from None
    except (CheckpointError, ExportTargetError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:  # e.g. no permission or no space where the export goes
        typer.echo(f"error: cannot write the export to {output}: {exc}", err=True)
        raise typer.Exit(1) from None


def _print_table(summaries: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from rlctl.inspect.run_metrics import format_duration, format_number

    # Columns: run name, logged steps, last step, last reward, mean reward of the last 10
    # steps, last validation reward, wall time, newest complete checkpoint, last write.
    table = Table(box=None, header_style="bold")
    for column, justify in (
        ("run", "left"),
        ("steps", "right"),
        ("last", "right"),
        ("reward", "right"),
        ("last10", "right"),
        ("val", "right"),
        ("wall", "right"),
        ("ckpt", "right"),
        ("updated (UTC)", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for s in summaries:
        table.add_row(
            Text(s.name),  # a Text, not a str: rich would read "[x]" in a run name as markup
            str(s.steps),
            "-" if s.last_step is None else str(s.last_step),
            format_number(s.last_reward),
            format_number(s.reward_last10),
            format_number(s.last_val_reward),
            format_duration(s.wall_time_s),
            "-" if s.last_checkpoint is None else f"step_{s.last_checkpoint}",
            (s.updated or "-")[:16].replace("T", " "),
        )
    Console().print(table)
