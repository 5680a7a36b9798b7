"""Each built-in sink writes what it should (read back with the format's own reader)."""

from __future__ import annotations

import importlib.util
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from rich.console import Console

from rlctl.registry import build_registry
from rlctl.sinks import MetricLogger, SinkBuildError
from rlctl.sinks.console import ConsoleSink
from rlctl.sinks.jsonl import make_jsonl_sink
from rlctl.sinks.options import ConsoleSinkOptions, JsonlSinkOptions, TensorBoardSinkOptions
from rlctl.sinks.tensorboard_sink import make_tensorboard_sink


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_jsonl_writes_one_object_per_step(tmp_path: Path) -> None:
    sink = make_jsonl_sink(JsonlSinkOptions(), run_dir=tmp_path)
    sink.log(1, {"critic/score/mean": 0.25, "actor/kl": np.float32(0.5), "n": torch.tensor(3)})
    sink.log(2, {"critic/score/mean": float("nan"), "actor/kl": 1.0, "n": 4})
    sink.close()
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    assert (
        rows[0]["critic/score/mean"] == 0.25 and rows[0]["actor/kl"] == 0.5 and rows[0]["n"] == 3.0
    )
    assert rows[1]["critic/score/mean"] is None  # JSON has no NaN
    assert all(isinstance(r["time"], float) and r["time"] > 1e9 for r in rows)
    assert set(rows[1]) == {"step", "time", "critic/score/mean", "actor/kl", "n"}


def test_jsonl_flushes_every_step_so_a_crash_loses_nothing(tmp_path: Path) -> None:
    sink = make_jsonl_sink(JsonlSinkOptions(filename="m.jsonl"), run_dir=tmp_path)
    sink.log(1, {"x": 1.0})
    rows = read_jsonl(tmp_path / "m.jsonl")  # read while the sink is still open
    assert [(r["step"], r["x"]) for r in rows] == [(1, 1.0)]
    sink.close()


def test_jsonl_resume_drops_steps_logged_after_the_checkpoint(tmp_path: Path) -> None:
    first = make_jsonl_sink(JsonlSinkOptions(), run_dir=tmp_path)
    for step in range(1, 8):
        first.log(step, {"x": float(step)})
    first.close()
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 8, "x": ')  # the line a SIGKILL cut short
    # resumed from a checkpoint at step 5
    resumed = make_jsonl_sink(JsonlSinkOptions(), run_dir=tmp_path)
    resumed.log(6, {"x": 60.0})
    resumed.log(7, {"x": 70.0})
    resumed.close()
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [(r["step"], r["x"]) for r in rows] == [
        (1, 1.0),
        (2, 2.0),
        (3, 3.0),
        (4, 4.0),
        (5, 5.0),
        (6, 60.0),
        (7, 70.0),
    ]


def test_jsonl_options_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="flush_evry"):
        JsonlSinkOptions.model_validate({"flush_evry": 2})
    with pytest.raises(ValueError, match="filename"):
        JsonlSinkOptions.model_validate({"filename": "../escape.jsonl"})


def test_console_prints_a_compact_line_of_the_key_metrics() -> None:
    buf = io.StringIO()
    sink = ConsoleSink(
        ConsoleSinkOptions(), console=Console(file=buf, width=300, color_system=None)
    )
    sink.log(
        3, {"critic/score/mean": 0.53125, "actor/kl": 0.0012, "actor/pg_loss": -0.1, "other/x": 9.0}
    )
    line = buf.getvalue().strip()
    assert line == "step 3 │ score 0.5312 │ pg_loss -0.1 │ kl 0.0012"


def test_console_every_and_all_metrics() -> None:
    buf = io.StringIO()
    options = ConsoleSinkOptions(every=2, all_metrics=True, precision=2)
    sink = ConsoleSink(options, console=Console(file=buf, width=300, color_system=None))
    for step in (1, 2, 3, 4):
        sink.log(step, {"b": 1.234, "a": float(step)})
    assert buf.getvalue().splitlines() == ["step 2 │ a 2 │ b 1.2", "step 4 │ a 4 │ b 1.2"]


def _tb_scalars(log_dir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_tensorboard_event_file_reads_back(tmp_path: Path) -> None:
    sink = make_tensorboard_sink(TensorBoardSinkOptions(), run_dir=tmp_path)
    for step in (1, 2, 3):
        sink.log(step, {"critic/score/mean": step / 4, "actor/kl": torch.tensor(0.5)})
    sink.close()
    log_dir = tmp_path / "tensorboard"
    assert _tb_scalars(log_dir, "critic/score/mean") == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert _tb_scalars(log_dir, "actor/kl") == [(1, 0.5), (2, 0.5), (3, 0.5)]


def test_tensorboard_resume_purges_steps_after_the_checkpoint(tmp_path: Path) -> None:
    first = make_tensorboard_sink(TensorBoardSinkOptions(log_dir="tb"), run_dir=tmp_path)
    for step in (1, 2, 3, 4):
        first.log(step, {"x": float(step)})
    first.close()
    resumed = make_tensorboard_sink(TensorBoardSinkOptions(log_dir="tb"), run_dir=tmp_path)
    resumed.log(3, {"x": 30.0})
    resumed.log(4, {"x": 40.0})
    resumed.close()
    assert _tb_scalars(tmp_path / "tb", "x") == [(1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0)]


def test_builtin_sinks_are_registered_with_option_models() -> None:
    registry = build_registry(external="none")
    names = set(registry.names("metric_sink"))
    assert {"console", "jsonl", "tensorboard", "wandb", "mlflow"} <= names
    for name in ("console", "jsonl", "tensorboard", "wandb", "mlflow"):
        reg = registry.get("metric_sink", name)
        assert isinstance(reg.target, str) and ":" in reg.target  # lazy
        assert reg.options is not None and reg.description
        reg.load()  # the implementation module imports without its optional package


@pytest.mark.parametrize("sink", ["wandb", "mlflow"])
def test_optional_sink_selected_but_not_installed_is_a_clear_error(
    tmp_path: Path, sink: str
) -> None:
    if importlib.util.find_spec(sink) is not None:
        pytest.skip(f"{sink} is installed here")
    with pytest.raises(
        SinkBuildError, match=rf"metric sink .{sink}. is selected .* `pip install {sink}`"
    ):
        MetricLogger.from_names(
            ["jsonl", sink], run_dir=tmp_path, registry=build_registry(external="none")
        )


@pytest.mark.parametrize("sink", ["wandb", "mlflow"])
def test_validate_config_reports_a_missing_sink_package(sink: str) -> None:
    if importlib.util.find_spec(sink) is not None:
        pytest.skip(f"{sink} is installed here")
    from rlctl.config.recipe import LoggingSection, Recipe
    from rlctl.plugins.metric_sinks import validate_config

    recipe = Recipe(logging=LoggingSection(sinks=["console", sink]))
    problems = validate_config(recipe)
    assert [(p.path, sink in p.message, f"pip install {sink}" in p.fix) for p in problems] == [
        ("logging.sinks[1]", True, True)
    ]
    assert validate_config(Recipe()) == []


def test_wandb_offline_when_installed(tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    logger = MetricLogger.from_names(
        ["wandb"],
        run_dir=tmp_path,
        options={"wandb": {"mode": "offline"}},
        registry=build_registry(external="none"),
    )
    logger.log(1, {"critic/score/mean": 0.5})
    logger.close()
    assert logger.failures == []
    assert (tmp_path / "wandb_run_id").read_text().strip()
    assert any((tmp_path / "wandb").iterdir())


def test_mlflow_sqlite_store_when_installed(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    registry = build_registry(external="none")
    for steps in ((1,), (2,)):  # the second logger is a resumed run: same mlflow run
        logger = MetricLogger.from_names(["mlflow"], run_dir=tmp_path, registry=registry)
        for step in steps:
            logger.log(step, {"critic/score/mean": step / 2})
        logger.close()
        assert logger.failures == []
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}")
    run_id = (tmp_path / "mlflow_run_id").read_text().strip()
    history = client.get_metric_history(run_id, "critic/score/mean")
    assert sorted((m.step, m.value) for m in history) == [(1, 0.5), (2, 1.0)]


def test_registration_and_readers_import_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "import rlctl.plugins.metric_sinks, rlctl.cli.runs_cmd\n"
        "import rlctl.sinks, rlctl.checkpoint, rlctl.inspect\n"
        "heavy = [m for m in ('torch', 'ray', 'transformers', 'matplotlib', 'tensorboard', 'numpy')"
        " if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_non_finite_values_never_reach_tensorboard_as_inf(tmp_path: Path) -> None:
    sink = make_tensorboard_sink(TensorBoardSinkOptions(), run_dir=tmp_path)
    sink.log(1, {"x": math.inf, "y": 1.0})
    sink.close()
    assert _tb_scalars(tmp_path / "tensorboard", "y") == [(1, 1.0)]
