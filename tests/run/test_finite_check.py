"""A run whose scores, losses or gradient norm stop being numbers stops with exit 1, naming
the step and the metric, after logging that step and before checkpointing it (issue 30: NaN
runs exited 0 and exported the poisoned model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlctl.run.finite_check import NonFiniteMetricError, check_finite, non_finite
from tests.run.cli_recipes import ROOT, install_plugin, tiny_toml

NAN, INF = float("nan"), float("inf")


def test_finite_metrics_pass_and_unwatched_ones_are_not_checked():
    check_finite(1, {"critic/score/mean": 0.5, "actor/pg_loss": -0.1, "actor/grad_norm": 2.0,
                     "timing_s/gen": NAN, "actor/entropy": INF, "actor/loss": None})


def test_the_first_metric_named_is_the_first_a_step_computes():
    metrics = {"actor/grad_norm": NAN, "actor/pg_loss": INF, "critic/vf_loss": NAN,
               "critic/advantages/max": NAN, "critic/score/mean": NAN}
    assert [name for name, _ in non_finite(metrics)] == [
        "critic/score/mean", "critic/advantages/max", "critic/vf_loss", "actor/pg_loss",
        "actor/grad_norm"]
    with pytest.raises(NonFiniteMetricError) as err:
        check_finite(7, metrics)
    assert (err.value.step, err.value.metric) == (7, "critic/score/mean")
    assert str(err.value).startswith(
        "step 7: critic/score/mean is nan (also not finite: critic/advantages/max, "
        "critic/vf_loss, actor/pg_loss, actor/grad_norm); the run stopped before saving")
    assert "a reward returned NaN or inf" in str(err.value)


def test_a_non_finite_score_names_the_rewards_that_returned_it():
    with pytest.raises(NonFiniteMetricError) as err:
        check_finite(2, {"critic/score/mean": NAN, "reward/digits": 0.5, "reward/judge": INF,
                         "reward/judge/parsed": NAN})
    assert str(err.value).endswith("Likely cause: reward judge returned NaN or inf")


@pytest.mark.parametrize(("metric", "value", "cause"), [
    ("actor/grad_norm", INF, "the policy update diverged"),
    ("actor/loss", -INF, "the policy update diverged"),
    ("critic/vf_loss", NAN, "the critic update diverged"),
    ("critic/score", NAN, "a reward returned NaN or inf"),
])
def test_each_watched_metric_stops_the_run_with_its_cause(metric, value, cause):
    with pytest.raises(NonFiniteMetricError, match=f"^step 3: {metric} is {value}; .*{cause}"):
        check_finite(3, {metric: value, "critic/score/mean": 0.25})


# A reward plugin as pip installs it: scores are finite in step 1, NaN from step 2 on (the
# lifecycle hook flips it; --local scores in the controller's process).
POISON = '''
from rlctl.hookspecs import hookimpl

POISONED = []


def poisoned(sample, **options):
    return float("nan") if POISONED else float(len(sample.response_text) % 2)


@hookimpl
def register_reward_functions(register):
    register("poisoned", poisoned)


@hookimpl
def on_step_end(step, metrics):
    POISONED.append(step)
'''


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``rlctl train --local --quiet`` (data plane ``ray``) of a run whose reward is NaN from
    step 2, checkpointing every step."""
    tmp = tmp_path_factory.mktemp("nan")
    site = install_plugin(tmp / "site", "rlctl-test-poison", "0.1", "poison", POISON)
    toml = tiny_toml(tmp, name="nan", reward="poisoned", save_every=1)
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{site}", RLCTL_PLUGINS="poison")
    proc = subprocess.run([sys.executable, "-m", "rlctl", "train", str(toml), "--quiet"],
                          cwd=tmp, env=env, capture_output=True, text=True, check=False,
                          timeout=400)
    return proc, tmp / "runs" / "nan"


@pytest.mark.slow
@pytest.mark.timeout(450)
def test_a_run_whose_reward_turns_nan_stops_at_that_step_without_saving_it(nan_run):
    proc, run_dir = nan_run
    assert proc.returncode == 1, proc.stderr[-3000:]
    (line,) = [x for x in proc.stderr.splitlines() if "NonFiniteMetricError" in x]
    assert line.startswith("training failed: NonFiniteMetricError: step 2: critic/score/")
    assert line.endswith("Likely cause: reward poisoned returned NaN or inf")
    assert "Traceback" not in proc.stderr
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]  # step 2 is logged: the user sees its NaNs
    assert rows[1]["critic/score/mean"] is None and rows[0]["critic/score/mean"] is not None
    checkpoints = run_dir / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("step_*")) == ["step_1"]
    assert (checkpoints / "latest").read_text().strip() == "step_1"
    assert not (run_dir / "hf").exists()  # no export of the poisoned weights


@pytest.mark.slow
@pytest.mark.timeout(450)
def test_a_quiet_local_run_prints_no_other_programs_log_lines(nan_run):
    """Ray starts for the data plane, and says nothing: the one line is rlctl's."""
    proc, _ = nan_run
    assert proc.stdout == ""
    assert [x for x in proc.stderr.splitlines() if x.strip()] == [
        next(x for x in proc.stderr.splitlines() if x.startswith("training failed:"))]
