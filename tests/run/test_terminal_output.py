"""What a user sees of ``rlctl train`` in a terminal: step lines above the progress bar, never
across it, one summary at the end, and no other program's log lines (issue 30)."""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path

import pytest
from inline_snapshot import snapshot
from rich.console import Console

from rlctl.run.progress import StepProgress
from rlctl.run.run_log import RunLog
from rlctl.run.summary import RunSummary
from rlctl.sinks.console import ConsoleSink, console_for, drawing_on
from rlctl.sinks.options import ConsoleSinkOptions
from tests.run.cli_recipes import ROOT, tiny_toml
from tests.run.terminal import run_in_terminal, screen

STEP_LINE = re.compile(r"step \d+ │")
BAR = ("━", "s/step", "-:--:--")  # fragments only the progress bar draws


def overlaps(lines: list[str]) -> list[str]:
    """Screen lines that hold a step line and a piece of the bar at once."""
    return [x for x in lines if STEP_LINE.search(x) and any(b in x for b in BAR)]


def test_while_a_bar_is_drawn_on_a_terminal_every_stream_prints_through_its_console(monkeypatch):
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # every console counts as a terminal
    drawn = Console(file=io.StringIO())
    assert console_for("stdout") is not drawn
    with drawing_on(drawn):
        assert console_for("stdout") is drawn and console_for("stderr") is drawn
    assert console_for("stderr") is not drawn
    monkeypatch.setenv("TTY_COMPATIBLE", "0")  # streams redirected: each keeps its own
    with drawing_on(drawn):
        assert console_for("stdout") is not drawn and console_for("stderr") is not drawn


def test_step_lines_and_warnings_land_above_the_bar(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("COLUMNS", "120")
    sink = ConsoleSink(ConsoleSinkOptions())
    with StepProgress(3, enabled=True) as progress:
        for step in (1, 2, 3):
            metrics = {"critic/score/mean": step / 10, "timing_s/step": 0.5}
            sink.log(step, metrics)
            RunLog(tmp_path).warn("a tool raised", step=step)
            progress.advance(step, metrics)
    out, err = capsys.readouterr()
    assert out == ""  # the step lines went through the bar's console (stderr)
    lines = screen(err.encode())
    assert overlaps(lines) == []
    assert [x.split(" │")[0] for x in lines if STEP_LINE.search(x)] == ["step 1", "step 2",
                                                                        "step 3"]
    assert lines[-1].startswith("step 3/3 ━")  # the bar stays last, below every line


def test_the_summary_says_where_the_run_is_and_how_it_went():
    summary = RunSummary(Path("runs/my run"), metrics_file=Path("runs/my run/metrics.jsonl"),
                         started=100.0)
    summary.record(6, {"critic/score/mean": 0.125})
    summary.record(7, {"critic/score/mean": float("nan")})
    summary.record(8, {"critic/score/mean": 0.5, "other": 1.0})
    summary.checkpoint = Path("runs/my run/checkpoints/step_8")
    summary.model = Path("runs/my run/hf")
    assert summary.lines(now=172.4) == [
        "done: 3 steps (6-8) in 0:01:12",
        "  run dir     runs/my run",
        "  metrics     runs/my run/metrics.jsonl",
        "  checkpoint  runs/my run/checkpoints/step_8",
        "  model       runs/my run/hf",
        "  reward      0.125 -> 0.5 (critic/score/mean, step 6 -> 8)",
        "  plot        rlctl report 'runs/my run'",
    ]
    bare = RunSummary(Path("r"), started=0.0)
    bare.record(1, {})
    assert bare.lines(now=2.25) == ["done: 1 step (1-1) in 2.2 s", "  run dir  r"]


def shape(line: str, run_dir: Path) -> str:
    """A screen line with what changes from run to run (numbers, times, paths) replaced."""
    if bar := re.match(r"step (\d+/\d+) ━", line):
        return f"<bar {bar[1]}>"
    line = line.replace(str(run_dir), "<run>")
    line = re.sub(r"(│ \S+ )\S+", r"\1#", line)
    line = re.sub(r" in (\d+\.\d s|\d+:\d\d:\d\d)$", " in #", line)
    return re.sub(r"(reward +)\S+ -> \S+", r"\1# -> #", line)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_local_run_in_a_terminal_shows_clean_lines_and_a_summary(tmp_path):
    """``rlctl train --local`` of a 3-step run whose data plane starts Ray, in a 120-column
    pseudo-terminal: what stays on the screen is the step lines, the bar under them, the
    summary, and nothing of Ray's."""
    toml = tiny_toml(tmp_path, name="pty")
    env = dict(os.environ, PYTHONPATH=str(ROOT), RLCTL_PLUGINS="none")
    code, raw = run_in_terminal([sys.executable, "-m", "rlctl", "train", str(toml), "--local"],
                                cwd=tmp_path, env=env, timeout_s=360)
    lines = screen(raw)
    assert code == 0, "\n".join(lines)
    assert overlaps(lines) == []
    assert not [x for x in lines if "Ray" in x or " INFO " in x or "WARNING" in x]
    run_dir = tmp_path / "runs" / "pty"
    assert (run_dir / "metrics.jsonl").is_file() and (run_dir / "hf").is_dir()
    assert [shape(x, run_dir) for x in lines] == snapshot([
        "step 1 │ score # │ pg_loss # │ kl # │ entropy # │ len # │ step_s #",
        "step 2 │ score # │ pg_loss # │ kl # │ entropy # │ len # │ step_s #",
        "step 3 │ score # │ pg_loss # │ kl # │ entropy # │ len # │ step_s #",
        "<bar 3/3>",
        "done: 3 steps (1-3) in #",
        "  run dir  <run>",
        "  metrics  <run>/metrics.jsonl",
        "  model    <run>/hf",
        "  reward   # -> # (critic/score/mean, step 1 -> 3)",
        "  plot     rlctl report <run>",
    ])
