"""Per-token log-probs of responses under the sampling distribution: the one definition.

Every training engine scores responses with it, and the rollout-engine parity contract
(:mod:`rlctl.testing.rollout_contract`) compares rollout engines' log-probs with it, so the
importance ratio of the policy loss compares like with like.
"""

from __future__ import annotations

import torch


def token_log_probs(
    logits: torch.Tensor, responses: torch.Tensor, temperature: float, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of ``responses [b, R]`` under ``softmax(logits / T)``, ``logits [b, R, V]``.

    ``temperature <= 0`` (greedy) is scored at T = 1.
    """
    scale = temperature if temperature > 0 else 1.0
    logp = torch.log_softmax(logits.float() / scale, dim=-1)  # [b, R, V]
    picked = logp.gather(-1, responses.unsqueeze(-1)).squeeze(-1)  # [b, R]
    entropy = -(logp.exp() * logp).sum(-1) if with_entropy else None  # [b, R]
    return picked, entropy
