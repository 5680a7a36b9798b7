"""Token in, token out: one output's tokens, built turn by turn, never re-tokenized.

A :class:`Trajectory` starts from the prompt's token ids. Each turn appends the engine's own
generated ids (mask 1, the engine's log-probs) and each observation appends its token ids
(mask 0, log-prob 0.0). The next turn's input is ``prompt_ids + response_ids``: exactly the
tokens that will be trained on, so what the trainer scores is what the engine saw::

    prompt_ids | gen turn 1 | obs 1 | gen turn 2 | obs 2 | gen turn 3
    loss_mask  |  1 1 1 1   | 0 0 0 |  1 1 1     | 0 0   |  1 1
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlctl.agents.contract import AgentOutput
from rlctl.engines.rollout.contract import WeightSegment


@dataclass
class Trajectory:
    """The tokens of one output under construction (see the module docstring)."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    token_rewards: list[float] = field(default_factory=list)
    turns: int = 0
    versions: list[int] = field(default_factory=list)
    last_turn_ids: list[int] = field(default_factory=list)
    finish_reason: str = "stop"
    segments: list[tuple[int, int, int]] = field(default_factory=list)
    """``(version, start, end)`` of every generated span (observations lie between them)."""
    aborts: int = 0
    resumes: int = 0

    @property
    def context(self) -> list[int]:
        """The next generation's input: the prompt and everything appended since."""
        return self.prompt_ids + self.response_ids

    @property
    def response_tokens(self) -> int:
        """Tokens after the prompt (generated and observed): what ``max_total_tokens`` caps."""
        return len(self.response_ids)

    def add_generation(self, gen: Any) -> None:
        """Append one turn exactly as the engine returned it (ids, log-probs, version)."""
        ids = [int(t) for t in gen.token_ids]
        if len(gen.log_probs) != len(ids):
            raise ValueError(
                f"engine returned {len(ids)} tokens but {len(gen.log_probs)} log-probs"
            )
        start = len(self.response_ids)
        spans = gen.weight_segments()
        if not spans and ids:
            spans = [WeightSegment(int(gen.weight_version), 0, len(ids))]
        self.segments += [(s.version, s.start + start, s.end + start) for s in spans]
        self.aborts += int(gen.aborts)
        self.resumes += int(gen.resumes)
        self.response_ids += ids
        self.log_probs += [float(x) for x in gen.log_probs]
        self.loss_mask += [1] * len(ids)
        self.token_rewards += [0.0] * len(ids)
        self.turns += 1
        # every version a token of this turn came from (partial rollouts: several)
        self.versions += sorted({int(gen.weight_version), *(s.version for s in spans)})
        self.last_turn_ids = ids
        self.finish_reason = gen.finish_reason

    def add_observation(self, ids: list[int]) -> None:
        """Append observation tokens (read by the policy, never trained on)."""
        ids = [int(t) for t in ids]
        self.response_ids += ids
        self.log_probs += [0.0] * len(ids)
        self.loss_mask += [0] * len(ids)
        self.token_rewards += [0.0] * len(ids)

    def reward_last_turn(self, reward: float) -> None:
        """Add a per-step reward on the last generated token (an environment's step)."""
        for i in range(len(self.loss_mask) - 1, -1, -1):
            if self.loss_mask[i]:
                self.token_rewards[i] += float(reward)
                return
        raise ValueError("a step reward before any generated token")

    def to_output(
        self,
        *,
        reward_ids: list[int] | None = None,
        per_token_rewards: bool = False,
        extra: dict[str, Any] | None = None,
        metrics: dict[str, float] | None = None,
        finish_reason: str | None = None,
    ) -> AgentOutput:
        """The finished output. Its weight version is the oldest turn's (the stalest)."""
        return AgentOutput(
            prompt_ids=list(self.prompt_ids),
            response_ids=list(self.response_ids),
            rollout_log_probs=list(self.log_probs),
            finish_reason=finish_reason or self.finish_reason,
            weight_version=min(self.versions) if self.versions else 0,
            num_turns=self.turns,
            extra=dict(extra or {}, weight_versions=list(self.versions)),
            loss_mask=list(self.loss_mask),
            reward_ids=reward_ids,
            token_rewards=list(self.token_rewards) if per_token_rewards else None,
            metrics=dict(metrics or {}),
            weight_segments=list(self.segments),
            partial_aborts=self.aborts,
            partial_resumes=self.resumes,
        )
