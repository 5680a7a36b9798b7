"""Built-in commands: the ``bench`` group (``rlctl bench dataplane``, ``rlctl bench controller``).

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


def _check_backends(names: tuple[str, ...], cross_process: bool = True) -> None:
    """Registered data planes; with ``cross_process``, only those that work across processes
    (``bench dataplane`` puts from a Ray actor; ``bench controller``'s stand-ins are threads)."""
    from rlctl.registry import get_registry

    registry = get_registry()
    for name in names:
        reg = registry.find("data_plane", name)
        if reg is None:
            raise typer.BadParameter(
                f"no data plane named {name!r} (registered: "
                f"{', '.join(registry.names('data_plane'))})", param_hint="--backends")
        # multi_process: its registration's declared metadata
        if cross_process and reg.metadata.get("multi_process") is False:
            raise typer.BadParameter(
                f"the {name!r} data plane lives in one process; the benchmark measures puts "
                "from another process", param_hint="--backends")


def _csv(text: str, option: str, cast=str) -> tuple:
    try:
        values = tuple(cast(v.strip()) for v in text.split(",") if v.strip())
    except ValueError:
        raise typer.BadParameter(f"not a comma-separated list of numbers: {text!r}",
                                 param_hint=option) from None
    if not values:
        raise typer.BadParameter("give at least one value", param_hint=option)
    return values


@bench_app.command("controller")
def bench_controller(
    backends: str = typer.Option(
        "memory,ray,transferqueue", help="Comma-separated data-plane backends to measure."
    ),
    sizes: str = typer.Option(
        "1024,4096,16384,65536,262144,1048576", help="Samples per step, comma-separated."
    ),
    modes: str = typer.Option(
        "session,call",
        help="Put shapes: 'session' (each session's put on its own) and/or 'call' (one "
        "kv_batch_put per worker call).",
    ),
    group_size: int = typer.Option(8, min=1, help="Sessions per prompt (the group size n)."),
    workers: int = typer.Option(8, min=1, help="Rollout-worker stand-ins."),
    sessions: int = typer.Option(
        8, min=1, help="Concurrent session threads per stand-in (mode 'session')."
    ),
    ranks: int = typer.Option(
        0, min=0, help="Training ranks to split each step over; 0: samples / 1024 in [2, 1024]."
    ),
    put_load: bool = typer.Option(
        True, help="Also measure tag puts/s from --put-processes writer processes (ray)."
    ),
    put_processes: int = typer.Option(8, min=1, help="Writer processes of the put load."),
    put_sessions: int = typer.Option(64, min=1, help="Threads per writer process."),
    puts: int = typer.Option(80_000, min=1, help="Tag puts of the put load, in total."),
    json_out: bool = typer.Option(
        False, "--json", help="Print one JSON object instead of a table."
    ),
) -> None:
    """Controller cost per sample as steps grow (stand-in workers: metadata and tags only)."""
    import json

    from rlctl.bench.controller import ControllerBenchConfig, format_table, run_controller_bench
    from rlctl.bench.put_load import PutLoadConfig

    chosen = _csv(modes, "--modes")
    if set(chosen) - {"session", "call"}:
        raise typer.BadParameter("modes are 'session' and 'call'", param_hint="--modes")
    names = _csv(backends, "--backends")
    _check_backends(names, cross_process=False)
    cfg = ControllerBenchConfig(
        backends=names,
        sizes=_csv(sizes, "--sizes", int),
        modes=chosen,
        group_size=group_size,
        workers=workers,
        sessions=sessions,
        ranks=ranks,
        put_load=PutLoadConfig(processes=put_processes, sessions=put_sessions, puts=puts)
        if put_load else None,
    )
    if any(n < group_size for n in cfg.sizes):
        raise typer.BadParameter(f"every size needs at least --group-size ({group_size}) "
                                 "samples", param_hint="--sizes")
    result = run_controller_bench(cfg)
    typer.echo(json.dumps(result) if json_out else format_table(result))


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    cli.add_typer(bench_app, name="bench")
