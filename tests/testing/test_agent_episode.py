"""The kit agent authors test their agent functions with: one episode, a scripted policy."""

from __future__ import annotations

import pytest

from rlctl.agents.contract import EpisodeError
from rlctl.testing.agent_episode import run_episode


def test_an_episode_runs_through_the_real_loop_with_the_scripted_replies():
    outs = run_episode("tests.agents.agent_functions:summarising", "q", lambda context: "ok")
    assert len(outs) == 2 and all(o.extra["agent_reward"] == 0.5 for o in outs)
    assert all(o.num_turns == 1 for o in outs)


def test_a_failing_agent_raises_the_episode_error_the_worker_scores_zero():
    with pytest.raises(EpisodeError, match="unparseable structured output") as err:
        run_episode("tests.agents.agent_functions:always_fails", "q", lambda context: "x")
    assert err.value.outputs == [] and err.value.metrics["episode_errors"] == 1
    with pytest.raises(ValueError, match="unparseable"):
        run_episode("tests.agents.agent_functions:always_fails", "q", lambda context: "x",
                    on_episode_error="fail")
