"""Registration, the factory, and the `bench dataplane` command (small sizes)."""

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from rlctl.dataplane import DataPlaneError, open_data_plane
from rlctl.registry import get_registry


def test_backends_are_registered_lazily_with_option_models():
    reg = get_registry()
    assert {"memory", "ray", "transferqueue"} <= set(reg.names("data_plane"))
    assert reg.get("data_plane", "ray").metadata["multi_process"] is True
    assert reg.get("data_plane", "memory").metadata["multi_process"] is False
    code = (
        "import sys; from rlctl.registry import get_registry; get_registry(); "
        "print(sorted(m for m in ('torch', 'ray', 'transfer_queue') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_factory_validates_options_and_names():
    with pytest.raises(DataPlaneError, match="copy_on_putt"):
        open_data_plane("memory", {"copy_on_putt": True}, run_id="x")
    with pytest.raises(Exception, match="no data plane named 'nope'"):
        open_data_plane("nope", {}, run_id="x")
    plane = open_data_plane("memory", {"copy_on_put": False}, run_id="x")
    assert plane.options.copy_on_put is False
    plane.close()


def test_ray_backend_needs_ray_initialised():
    # A fresh interpreter: this session may hold a Ray cluster already (the data-plane suites
    # start one; which ran before depends on the order, and under pytest-xdist on the worker).
    code = (
        "import ray; from rlctl.dataplane import DataPlaneError, open_data_plane\n"
        "assert not ray.is_initialized()\n"
        "try:\n    open_data_plane('ray', {}, run_id='x')\n"
        "except DataPlaneError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ray.init" in out.stdout, out.stdout


def _cli() -> typer.Typer:
    from rlctl.cli import bench_cmd as commands

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    commands.register_commands(cli=app)
    return app


def test_bench_help_lists_options():
    result = CliRunner().invoke(_cli(), ["bench", "dataplane", "--help"])
    assert result.exit_code == 0, result.output
    for flag in ["--backends", "--samples", "--seq-len", "--fields", "--jagged", "--json"]:
        assert flag in result.output


@pytest.mark.slow
def test_bench_json_output(ray_cluster, tq_plane_session):
    # tq_plane_session: the bench attaches to the running TransferQueue instead of starting one
    result = CliRunner().invoke(
        _cli(),
        [
            "bench",
            "dataplane",
            "--backends",
            "ray,transferqueue",
            "--samples",
            "16",
            "--seq-len",
            "64",
            "--fields",
            "2",
            "--jagged",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--settle-ms",
            "0",
            "--small-puts",
            "40",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output.strip().splitlines()[-1])
    assert set(data) == {"rows", "readiness_ms", "small_puts_per_s"}
    assert set(data["small_puts_per_s"]) == {"ray", "transferqueue"}
    assert all(rate > 0 for rate in data["small_puts_per_s"].values())
    names = [r["backend"] for r in data["rows"]]
    assert names[0] == "ray" and "transferqueue" in names and names[-1] == "baseline"
    for row in data["rows"]:
        assert set(row) == {"backend", "put_gib_s", "get_gib_s"}
        assert row["put_gib_s"] > 0 and row["get_gib_s"] > 0
    assert 0 <= data["readiness_ms"] < 1000
