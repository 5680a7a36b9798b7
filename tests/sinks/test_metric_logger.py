"""MetricLogger: fan-out, report-and-continue on sink failures, clear build errors."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from rlctl.config.recipe import LoggingSection
from rlctl.registry import build_registry
from rlctl.sinks import MetricLogger, SinkBuildError
from rlctl.sinks.jsonl import make_jsonl_sink
from rlctl.sinks.options import JsonlSinkOptions


class RecordingSink:
    """A sink that keeps what it got (a real sink implementation, in memory)."""

    def __init__(self) -> None:
        self.logged: list[tuple[int, dict[str, float]]] = []
        self.closed = False

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.logged.append((step, dict(metrics)))

    def close(self) -> None:
        self.closed = True


class DashboardDownSink:
    """A sink whose backend is unreachable: every call raises."""

    def __init__(self, fail_from_step: int = 0) -> None:
        self.fail_from_step = fail_from_step
        self.calls = 0

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.calls += 1
        if step >= self.fail_from_step:
            raise ConnectionError("dashboard.example:443 unreachable")

    def close(self) -> None:
        raise ConnectionError("could not flush")


def test_a_failing_sink_is_reported_and_the_others_go_on(tmp_path: Path) -> None:
    reports: list[str] = []
    recording = RecordingSink()
    jsonl = make_jsonl_sink(JsonlSinkOptions(), run_dir=tmp_path)
    logger = MetricLogger(
        {"flaky": DashboardDownSink(fail_from_step=2), "jsonl": jsonl, "memory": recording},
        report=reports.append,
    )
    for step in range(1, 6):
        logger.log(step, {"critic/score/mean": step / 10})
    logger.close()

    assert [s for s, _ in recording.logged] == [1, 2, 3, 4, 5] and recording.closed
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    # four log failures (steps 2-5) and one close failure are all recorded...
    assert [(f.sink, f.step) for f in logger.failures] == [
        ("flaky", 2),
        ("flaky", 3),
        ("flaky", 4),
        ("flaky", 5),
        ("flaky", None),
    ]
    # ...but the same error is shown once, plus the close error and the total
    assert len(reports) == 3
    assert (
        "metric sink 'flaky' failed at step 2: ConnectionError: dashboard.example:443 unreachable"
        in reports[0]
    )
    assert "the run goes on" in reports[0]
    assert "while closing" in reports[1]
    assert reports[2] == "metric sink 'flaky' failed 5 times during this run"


def test_non_scalar_metrics_are_dropped_and_reported_once() -> None:
    reports: list[str] = []
    recording = RecordingSink()
    logger = MetricLogger({"memory": recording}, report=reports.append)
    logger.log(1, {"a": 1, "hist": [1, 2, 3], "skipped": None})
    logger.log(2, {"a": 2, "hist": [4]})
    logger.close()
    assert recording.logged == [(1, {"a": 1.0}), (2, {"a": 2.0})]
    assert reports == ["metrics ['hist'] are not scalars and are not logged (step 1)"]


def test_log_after_close_is_an_error() -> None:
    logger = MetricLogger({"memory": RecordingSink()})
    logger.close()
    logger.close()  # idempotent
    with pytest.raises(RuntimeError, match="after close"):
        logger.log(1, {"a": 1.0})


def test_builds_registered_sinks_from_the_logging_section(tmp_path: Path) -> None:
    section = LoggingSection(
        sinks=["jsonl", "tensorboard"], sink_options={"jsonl": {"filename": "m.jsonl"}}
    )
    with MetricLogger.from_logging_section(
        section, run_dir=tmp_path, registry=build_registry(external="none")
    ) as logger:
        assert list(logger.sinks) == ["jsonl", "tensorboard"]
        logger.log(1, {"x": 1.0})
    assert (tmp_path / "m.jsonl").is_file()
    assert any((tmp_path / "tensorboard").glob("events.out.tfevents.*"))


def test_unknown_sink_names_the_registered_ones(tmp_path: Path) -> None:
    with pytest.raises(
        SinkBuildError, match=r"no metric sink named 'jsonll' is registered \(registered: .*jsonl"
    ):
        MetricLogger.from_names(
            ["jsonll"], run_dir=tmp_path, registry=build_registry(external="none")
        )


def test_options_for_an_unselected_sink_are_an_error(tmp_path: Path) -> None:
    with pytest.raises(SinkBuildError, match=r"sink_options has options for \['tensorboard'\]"):
        MetricLogger.from_names(
            ["jsonl"],
            run_dir=tmp_path,
            options={"tensorboard": {}},
            registry=build_registry(external="none"),
        )


def test_bad_options_name_the_sink_and_the_key(tmp_path: Path) -> None:
    with pytest.raises(
        SinkBuildError,
        match=(
            r"(?s)'console' could not be built: invalid options\n"
            r"  logging\.sink_options\.console\.evry: Extra inputs"
        ),
    ):
        MetricLogger.from_names(
            ["jsonl", "console"],
            run_dir=tmp_path,
            options={"console": {"evry": 2}},
            registry=build_registry(external="none"),
        )


def test_from_recipe_and_quiet_leaves_out_the_console(tmp_path: Path) -> None:
    from rlctl.config.recipe import Recipe

    recipe = Recipe(
        logging=LoggingSection(sinks=["console", "jsonl"], sink_options={"console": {"every": 10}})
    )
    registry = build_registry(external="none")
    loud = MetricLogger.from_recipe(recipe, tmp_path, registry=registry)
    assert list(loud.sinks) == ["console", "jsonl"]
    loud.close()
    quiet = MetricLogger.from_recipe(recipe, tmp_path, quiet=True, registry=registry)
    assert list(quiet.sinks) == ["jsonl"]
    quiet.close()


def test_default_report_goes_to_stderr_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    logger = MetricLogger({"flaky": DashboardDownSink()})
    logger.log(1, {"x": 1.0, "[logging] bad": [1]})
    err = capsys.readouterr().err
    assert "warning: metrics ['[logging] bad'] are not scalars" in err
    assert "metric sink 'flaky' failed at step 1" in err
