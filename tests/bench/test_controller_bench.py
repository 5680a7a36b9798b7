"""``rlctl bench controller``: a small run per plane gives every figure, and the put load
loses nothing. The sizes are tiny: these check the benchmark, not the machine's speed."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

# (importing it sets Ray's loopback-only environment before Ray is imported)
from rlctl.bench.controller import ControllerBenchConfig, bench_plane, format_table

FIGURES = {"ctrl_cpu_us", "wall_s", "after_last_put_ms", "bytes_per_sample", "peak_mib",
           "group_partition_ms", "shards_ms", "equal_partition_ms", "growth"}


def _cli() -> typer.Typer:
    from rlctl.cli import bench_cmd

    app = typer.Typer()
    bench_cmd.register_commands(cli=app)
    return app


@pytest.mark.parametrize("mode", ["session", "call"])
def test_memory_plane_steps_report_every_figure(mode):
    cfg = ControllerBenchConfig(backends=("memory",), sizes=(64, 256), modes=(mode,),
                                workers=2, sessions=3, ranks=4)
    rows = bench_plane("memory", mode, cfg)
    assert [r["samples"] for r in rows] == [64, 256] and [r["ranks"] for r in rows] == [4, 4]
    for row in rows:
        assert FIGURES <= set(row) and row["index_cpu_us"] is None  # no index actor
        assert row["ctrl_cpu_us"] > 0 and 0 < row["bytes_per_sample"] < 1024
    assert rows[0]["growth"] == 1.0
    text = format_table({"rows": rows, "put_load": None, "load": (1.0, 1.0, 1.0)})
    assert f"memory, one put per {mode}" in text and "256" in text


def test_ranks_scale_with_the_step_unless_given():
    cfg = ControllerBenchConfig()
    assert [cfg.ranks_for(n) for n in (1024, 65536, 1 << 20, 1 << 22)] == [2, 64, 1024, 1024]
    assert ControllerBenchConfig(ranks=8).ranks_for(1 << 20) == 8


def test_bad_options_exit_2():
    runner = CliRunner()
    for args in (["--modes", "batch"], ["--sizes", "a,b"], ["--sizes", "4"]):
        result = runner.invoke(_cli(), ["bench", "controller", *args])
        assert result.exit_code == 2, (args, result.output)


@pytest.mark.slow
def test_ray_planes_and_the_put_load_through_the_cli():
    """Both Ray planes (their index actor's CPU is reported) and two writer processes putting
    tags: every put is there once, with its tags."""
    result = CliRunner().invoke(_cli(), [
        "bench", "controller", "--backends", "ray,transferqueue", "--sizes", "64,128",
        "--workers", "2", "--sessions", "2", "--put-processes", "2", "--put-sessions", "4",
        "--puts", "800", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output.strip().splitlines()[-1])
    assert {(r["backend"], r["mode"]) for r in data["rows"]} == {
        (b, m) for b in ("ray", "transferqueue") for m in ("session", "call")}
    assert all(r["index_cpu_us"] is not None and r["samples"] in (64, 128)
               for r in data["rows"])
    load = data["put_load"]
    assert load["puts"] == 800 and load["problems"] == [] and load["puts_per_s"] > 0


@pytest.mark.heavy
def test_eight_writer_processes_lose_and_duplicate_nothing():
    """The bar's load (8 writer processes of 64 threads each) at a size CI can afford: every
    put is in the partition once with its tags, and the index applied each exactly once."""
    from rlctl.bench.dataplane import ensure_ray
    from rlctl.bench.put_load import PutLoadConfig, run_put_load

    started = ensure_ray()
    try:
        load = run_put_load(PutLoadConfig(processes=8, sessions=64, puts=20_480))
    finally:
        if started is not None:
            import ray

            ray.shutdown()
            started.release()
    assert load["puts"] == 20_480 and load["problems"] == []
