"""Built-in commands: the ``bench`` group (``rlctl bench dataplane``).

Imports stay inside the command so that ``rlctl --help`` never loads torch or Ray.
"""

from __future__ import annotations

import typer

from rlctl.hookspecs import hookimpl

bench_app = typer.Typer(help="Benchmarks that run on this machine.", no_args_is_help=True)


@bench_app.callback()
def _bench_group() -> None:
    """Benchmarks that run on this machine."""
    # A callback keeps `bench` a group even while it holds a single command.


@bench_app.command("dataplane")
def bench_dataplane(
    backends: str = typer.Option(
        "ray,transferqueue", help="Comma-separated data-plane backends to measure."
    ),
    samples: int = typer.Option(512, min=1, help="Samples in the step (batch size)."),
    seq_len: int = typer.Option(4096, min=1, help="Tokens per sample (the maximum with --jagged)."),
    fields: int = typer.Option(6, min=1, help="Fields per sample (int64 and float32 alternate)."),
    jagged: bool = typer.Option(
        False, "--jagged/--dense", help="Variable-length fields (lengths in [T/4, T])."
    ),
    repeats: int = typer.Option(5, min=1, help="Repetitions; the best is reported."),
    warmup: int = typer.Option(2, min=0, help="Untimed repetitions before the timed ones."),
    settle_ms: int = typer.Option(
        1100,
        min=0,
        help="Pause after each repetition's clear (Ray frees cleared blocks once a second).",
    ),
    small_puts: int = typer.Option(
        2000, min=0, help="Single-key puts shared by 8 writer threads (puts/s); 0 skips."
    ),
    zero_copy_row: bool = typer.Option(
        True, help="With ray: also measure ray with zero_copy_reads (row 'ray+zero_copy_reads')."
    ),
    json_out: bool = typer.Option(
        False, "--json", help="Print one JSON object instead of a table."
    ),
) -> None:
    """Cross-process put/get throughput per backend vs. pickling through the controller."""
    import json

    from rlctl.bench.dataplane import BenchConfig, format_table, run_bench

    names = tuple(b.strip() for b in backends.split(",") if b.strip())
    if not names:
        raise typer.BadParameter("give at least one backend", param_hint="--backends")
    _check_backends(names)
    cfg = BenchConfig(
        backends=names,
        samples=samples,
        seq_len=seq_len,
        fields=fields,
        jagged=jagged,
        repeats=repeats,
        warmup=warmup,
        zero_copy_row=zero_copy_row,
        settle_s=settle_ms / 1000,
        small_puts=small_puts,
    )
    result = run_bench(cfg)
    typer.echo(json.dumps(result) if json_out else format_table(result, cfg))


def _check_backends(names: tuple[str, ...]) -> None:
    """Registered data planes that work across processes (the benchmark puts from a Ray actor)."""
    from rlctl.registry import get_registry

    registry = get_registry()
    for name in names:
        reg = registry.find("data_plane", name)
        if reg is None:
            raise typer.BadParameter(
                f"no data plane named {name!r} (registered: "
                f"{', '.join(registry.names('data_plane'))})", param_hint="--backends")
        if reg.metadata.get("multi_process") is False:  # its registration's declared metadata
            raise typer.BadParameter(
                f"the {name!r} data plane lives in one process; the benchmark measures puts "
                "from another process", param_hint="--backends")


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    cli.add_typer(bench_app, name="bench")
