"""`rlctl report` and `rlctl runs list`, through the register_commands hook."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from rlctl.checkpoint import CheckpointManager
from rlctl.cli.runs_cmd import register_commands
from rlctl.inspect import list_runs, read_metrics, summarize
from rlctl.inspect.report import moving_average, run_labels
from tests.inspect.synthetic_runs import rising_run, write_metrics


@pytest.fixture(scope="module")
def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """A root like rlctl's, so sub-commands are dispatched by name."""

    register_commands(app)
    return app


def invoke(cli: typer.Typer, *args: str):
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})


def read_png(path: Path):
    import matplotlib.image

    return matplotlib.image.imread(path)


def test_report_writes_a_png_and_a_summary(
    cli: typer.Typer, synthetic_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.png"
    result = invoke(cli, "report", str(synthetic_run), "--output", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = read_png(out)
    assert image.shape[:2] == (850, 1500)
    assert image[..., :3].std() > 0.05  # curves were drawn, not a blank canvas
    # By hand: reward_i = 0.05 + 0.9 i/39 +- 0.02 (the +-0.02 cancel over 10 steps), so the
    # first 10 average 0.05 + 0.9 * 4.5/39 = 0.1538 and the last 10 0.05 + 0.9 * 34.5/39
    # = 0.8462; 40 steps logged 2 s apart plus the first step's 2 s = 80 s.
    assert result.output.splitlines() == [
        "tiny-grpo: 40 steps (1-40), wall 1m20s",
        "  reward critic/score/mean: first 10 0.154 -> last 10 0.846 (x5.5)",
        f"wrote {out}",
    ]


def test_report_overlays_several_runs(cli: typer.Typer, tmp_path: Path) -> None:
    write_metrics(tmp_path / "a" / "run", rising_run(20))
    write_metrics(tmp_path / "b" / "run", rising_run(60, offset=0.02))
    out = tmp_path / "both.png"
    result = invoke(
        cli, "report", str(tmp_path / "a" / "run"), str(tmp_path / "b" / "run"), "-o", str(out)
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("a/run: 20 steps")  # same names: the parent tells them apart
    assert "\nb/run: 60 steps" in result.output
    assert read_png(out).shape[:2] == (850, 1500)


def test_report_on_a_missing_run_is_a_usage_error(cli: typer.Typer, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = invoke(cli, "report", str(tmp_path / "empty"), "-o", str(tmp_path / "r.png"))
    assert result.exit_code == 2
    assert "has no metrics.jsonl" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r.png").exists()


def test_runs_list_json_and_table(cli: typer.Typer, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_metrics(runs / "alpha", rising_run(12))
    write_metrics(runs / "beta", rising_run(3))
    manager = CheckpointManager(runs / "beta", durable=False)
    manager.commit(manager.begin(3), 3)
    (runs / "not-a-run").mkdir()

    result = invoke(cli, "runs", "list", str(runs), "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [(r["name"], r["steps"], r["last_step"], r["last_checkpoint"]) for r in rows] == [
        ("alpha", 12, 12, None),
        ("beta", 3, 3, 3),
    ]
    assert rows[0]["last_reward"] == pytest.approx(0.05 + 0.9 - 0.02)
    assert rows[1]["wall_time_s"] == pytest.approx(2 * 2.0 + 2.0)

    table = invoke(cli, "runs", "list", str(runs))
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[0].split() == [
        "run",
        "steps",
        "last",
        "reward",
        "last10",
        "val",
        "wall",
        "ckpt",
        "updated",
        "(UTC)",
    ]
    # alpha: last 0.05 + 0.9 - 0.02; last 10 = steps 3-12, mean 0.05 + 0.9 * 6.5/11 = 0.582
    # beta: last 0.05 + 0.9 + 0.02; all 3 steps: 0.05 + 0.9 * 0.5 + 0.02/3 = 0.507
    assert lines[1].split()[:8] == ["alpha", "12", "12", "0.930", "0.582", "-", "24s", "-"]
    assert lines[2].split()[:8] == ["beta", "3", "3", "0.970", "0.507", "-", "6s", "step_3"]


def test_runs_list_errors_and_empty(cli: typer.Typer, tmp_path: Path) -> None:
    missing = invoke(cli, "runs", "list", str(tmp_path / "nope"))
    assert missing.exit_code == 2 and "is not a directory" in missing.output
    empty = invoke(cli, "runs", "list", str(tmp_path))
    assert empty.exit_code == 0 and "no runs under" in empty.output


def test_resumed_run_reads_like_one_run(tmp_path: Path) -> None:
    run = tmp_path / "r"
    write_metrics(run, [{"critic/score/mean": 0.1}] * 5)
    with (run / "metrics.jsonl").open(
        "a"
    ) as f:  # a resumed run re-logged steps 4-5, then a torn line
        f.write(json.dumps({"step": 4, "time": 0, "critic/score/mean": 0.9}) + "\n")
        f.write(json.dumps({"step": 5, "time": 0, "critic/score/mean": 0.9}) + "\n")
        f.write('{"step": 6, "cri')
    metrics = read_metrics(run)
    assert metrics.steps == [1, 2, 3, 4, 5] and metrics.skipped_lines == 1
    assert metrics.series("critic/score/mean")[1] == [0.1, 0.1, 0.1, 0.9, 0.9]
    assert summarize(metrics).last_reward == 0.9
    assert [s.name for s in list_runs(tmp_path)] == ["r"]


def test_helpers() -> None:
    assert moving_average([0, 0, 3, 0, 0], 3) == [0, 1, 1, 1, 0]
    assert run_labels([Path("/x/a/run"), Path("/y/b/run")]) == ["a/run", "b/run"]
    assert run_labels([Path("/x/a"), Path("/x/b")]) == ["a", "b"]


def test_docs_cover_every_sink_and_option() -> None:
    from rlctl.sinks import options

    docs = (Path(__file__).parents[2] / "docs" / "runs.md").read_text()
    models = {
        "console": options.ConsoleSinkOptions,
        "jsonl": options.JsonlSinkOptions,
        "tensorboard": options.TensorBoardSinkOptions,
        "wandb": options.WandbSinkOptions,
        "mlflow": options.MlflowSinkOptions,
    }
    for sink, model in models.items():
        section = docs.split(f"- `{sink}`: ", 1)[1].split("\n- ", 1)[0]
        for field in model.model_fields:
            assert f"`{field}`" in section, f"docs/runs.md does not document {sink}.{field}"


def test_through_the_installed_cli(synthetic_run: Path, tmp_path: Path) -> None:
    """The real `rlctl` entry point picks the commands up from the register_commands hook."""
    import subprocess
    import sys

    out = tmp_path / "cli.png"
    report = subprocess.run(
        [sys.executable, "-m", "rlctl", "report", str(synthetic_run), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    assert report.stdout.startswith("tiny-grpo: 40 steps") and out.is_file()
    listing = subprocess.run(
        [sys.executable, "-m", "rlctl", "runs", "list", str(synthetic_run.parent), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert listing.returncode == 0, listing.stderr
    assert [r["name"] for r in json.loads(listing.stdout)] == ["tiny-grpo"]


def test_a_run_that_is_not_utf8_does_not_hide_the_others(cli: typer.Typer, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_metrics(runs / "good", rising_run(5))
    bad = runs / "bad"
    bad.mkdir(parents=True)
    (bad / "metrics.jsonl").write_bytes("step 1 \u00e9\n".encode("latin-1") + b"\xff\xfe\x00{\n")
    listing = invoke(cli, "runs", "list", str(runs), "--json")
    assert listing.exit_code == 0, listing.output
    rows = json.loads(listing.stdout)
    assert [(r["name"], r["steps"]) for r in rows] == [("bad", 0), ("good", 5)]
    assert (
        "warning: " in listing.stderr
        and "bad/metrics.jsonl: 2 unreadable line(s)" in listing.stderr
    )
    table = invoke(cli, "runs", "list", str(runs))
    assert table.exit_code == 0 and "good" in table.stdout

    out = tmp_path / "r.png"
    report = invoke(cli, "report", str(bad), str(runs / "good"), "-o", str(out))
    assert report.exit_code == 0, report.output
    assert "good: 5 steps" in report.stdout and "2 unreadable line(s)" in report.stdout
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_report_output_is_never_a_directory_or_a_file_of_the_user(
    cli: typer.Typer, synthetic_run: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "plots"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    result = invoke(cli, "report", str(synthetic_run), "-o", str(folder))
    assert result.exit_code == 2, result.output
    assert "is a directory" in result.output and "Traceback" not in result.output
    assert os.listdir(folder) == ["keep.txt"]

    other = tmp_path / "photo.png"
    other.write_bytes(b"\x89PNG\r\n\x1a\nnot ours")
    result = invoke(cli, "report", str(synthetic_run), "-o", str(other))
    assert result.exit_code == 2 and "not an earlier rlctl report" in result.output
    assert other.read_bytes() == b"\x89PNG\r\n\x1a\nnot ours"

    ours = tmp_path / "report.png"
    assert invoke(cli, "report", str(synthetic_run), "-o", str(ours)).exit_code == 0
    first = ours.read_bytes()
    again = invoke(cli, "report", str(synthetic_run), "-o", str(ours))  # a re-run replaces it
    assert again.exit_code == 0, again.output
    assert ours.read_bytes()[:8] == first[:8]
    forced = invoke(cli, "report", str(synthetic_run), "-o", str(other), "--overwrite")
    assert forced.exit_code == 0 and other.read_bytes() != b"\x89PNG\r\n\x1a\nnot ours"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photo.png", "plots", "report.png",
                                                          "runs"]


def test_run_names_are_printed_as_they_are(cli: typer.Typer, tmp_path: Path) -> None:
    """Rich reads "[...]" as markup: a run name must reach the table verbatim."""
    for name in ("exp[data]", "[red]", "[bold]y"):
        write_metrics(tmp_path / name, rising_run(2))
    table = invoke(cli, "runs", "list", str(tmp_path))
    assert table.exit_code == 0, table.output
    names = [line.split()[0] for line in table.stdout.splitlines()[1:]]
    assert names == ["[bold]y", "[red]", "exp[data]"]
