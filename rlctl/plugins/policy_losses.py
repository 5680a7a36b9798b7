"""Built-in policy losses (``[algorithm.loss] policy_loss = NAME``).

Targets are lazy ``module:attr`` strings: importing this module never imports torch.
Every loss is called with one :class:`rlctl.algorithms.policy_loss_inputs.PolicyLossInputs`
(``clip_low`` / ``clip_high`` / ``clip_ratio_c`` from ``[algorithm.loss]``, ignored by the
losses that do not use them, and the off-policy ``correction`` of ``[algorithm.correction]``)
and its own options from ``[algorithm.loss.options]``. Metadata: ``paper``;
``recommended_loss_agg`` where the method is defined with a specific aggregation (verl forces
it; rlctl honours the recipe).
"""

from __future__ import annotations

from rlctl.hookspecs import hookimpl

_PG = "rlctl.algorithms.policy_losses"
_COV = "rlctl.algorithms.covariance_losses"


@hookimpl
def register_policy_losses(register) -> None:
    # Imported on use: the registry imports this module for `rlctl --help` (no pydantic).
    from rlctl.plugins.policy_loss_options import ClipCovOptions, KlCovOptions, SapoOptions

    register(
        "vanilla", f"{_PG}:compute_policy_loss_vanilla",
        description="PPO clip with asymmetric clip_low/clip_high (DAPO) and dual-clip",
        paper="PPO arXiv:1707.06347; dual-clip arXiv:1912.09729; DAPO clip-higher arXiv:2503.14476",
    )
    register(
        "gspo", f"{_PG}:compute_policy_loss_gspo",
        description="PPO clip on the length-normalised sequence ratio",
        recommended_loss_agg="seq-mean-token-mean",
        paper="Group Sequence Policy Optimization, arXiv:2507.18071",
    )
    register(
        "cispo",
        f"{_PG}:compute_policy_loss_cispo",
        description="Clipped, stop-gradient IS weight times A log pi (every token keeps a "
                    "gradient)",
        paper="MiniMax-M1 (CISPO), arXiv:2506.13585",
    )
    register(
        "sapo", f"{_PG}:compute_policy_loss_sapo", options=SapoOptions,
        description="Soft sigmoid gate on the ratio instead of a hard clip",
        recommended_loss_agg="seq-mean-token-mean",
        paper="Soft Adaptive Policy Optimization, arXiv:2511.20347",
    )
    register(
        "clip_cov", f"{_COV}:compute_policy_loss_clip_cov", options=ClipCovOptions,
        description="PPO clip plus gradient dropped on a few high-covariance tokens",
        paper="The Entropy Mechanism of RL for Reasoning LMs, arXiv:2505.22617",
    )
    register(
        "kl_cov", f"{_COV}:compute_policy_loss_kl_cov", options=KlCovOptions,
        description="Unclipped PG plus |log ratio| penalty on the highest-covariance tokens",
        paper="The Entropy Mechanism of RL for Reasoning LMs, arXiv:2505.22617",
    )
    register(
        "gpg",
        f"{_PG}:compute_policy_loss_gpg",
        description="Plain policy gradient -A log pi (no ratio, no clip)",
        paper="GPG: A Simple and Strong Reinforcement Learning Baseline for Model Reasoning, "
              "arXiv:2504.02546",
    )
    register(
        "geo_mean", f"{_PG}:compute_policy_loss_geo_mean",
        description="GMPO: geometric mean of token-clipped ratios per sequence",
        recommended_loss_agg="seq-mean-token-mean",
        paper="Geometric-Mean Policy Optimization, arXiv:2507.20673",
    )
