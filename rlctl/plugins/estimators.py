"""Built-in advantage estimators (``[algorithm] estimator = NAME``).

Targets are lazy ``module:attr`` strings: importing this module never imports torch.
Metadata per registration:

* ``requires``: fields the trainer must fetch besides rewards, mask and group ids;
* ``group_based``: needs several samples per prompt and group-aware dispatch;
* ``paper``: where the method comes from (shown in docs/algorithms.md);
* ``recommended_loss_agg`` (optional): the loss aggregation the method is defined with.
"""

from __future__ import annotations

from rlctl.hookspecs import hookimpl

_MOD = "rlctl.algorithms.estimators"
_RET = "rlctl.algorithms.return_estimators"
_OTB = "rlctl.algorithms.token_baseline"


@hookimpl
def register_advantage_estimators(register) -> None:
    # Imported on use: the registry imports this module for `rlctl --help` (no pydantic).
    from rlctl.plugins.estimator_options import (
        GdpoOptions,
        GpgOptions,
        OptimalTokenBaselineOptions,
    )

    options = {"gdpo": GdpoOptions, "gpg": GpgOptions,
               "optimal_token_baseline": OptimalTokenBaselineOptions,
               "tir_optimal_token_baseline": OptimalTokenBaselineOptions}
    for name, target, metadata in ESTIMATORS:
        if name in options:
            metadata = dict(metadata, options=options[name])
        register(name, target, **metadata)


def _group_relative(attr: str, **metadata: object) -> tuple[str, dict[str, object]]:
    """An outcome estimator of :mod:`rlctl.algorithms.estimators`: needs group ids only."""
    return f"{_MOD}:{attr}", {"requires": frozenset(), "group_based": True, **metadata}


def _otb(attr: str, description: str) -> tuple[str, dict[str, object]]:
    """The two OTB variants differ only in how they align trajectories (by position or by
    valid token); everything they need and declare is the same."""
    return f"{_OTB}:{attr}", {
        "description": description, "requires": frozenset({"old_log_probs", "sum_pi_squared"}),
        "group_based": True, "paper": "Optimal Token Baseline (OTB), arXiv:2602.07078"}


# name -> (target, metadata), in registration order (``plugins list`` shows this order)
ESTIMATORS: list[tuple[str, str, dict[str, object]]] = [(name, *spec) for name, spec in [
    ("gae", (f"{_RET}:compute_gae_advantage", {
        "description": "Generalized advantage estimation with a critic (PPO)",
        "requires": frozenset({"values"}), "group_based": False,
        "paper": "High-Dimensional Continuous Control Using Generalized Advantage Estimation, "
                 "arXiv:1506.02438"})),
    ("grpo", _group_relative(
        "compute_grpo_advantage",
        description="Group-relative: (r - group mean) / (group std + eps)",
        paper="DeepSeekMath (GRPO), arXiv:2402.03300")),
    ("dr_grpo", _group_relative(
        "compute_dr_grpo_advantage",
        description="GRPO without std normalisation; pair with seq-mean-token-sum-norm",
        recommended_loss_agg="seq-mean-token-sum-norm",
        paper="Understanding R1-Zero-Like Training: A Critical Perspective (Dr. GRPO), "
              "arXiv:2503.20783")),
    ("grpo_passk", _group_relative(
        "compute_grpo_passk_advantage",
        description="Pass@k: only each group's best sample gets r_max - r_second",
        paper="Pass@k-style credit to the best sample, arXiv:2503.19595 (as implemented by "
              "verl)")),
    ("gdpo", _group_relative(
        "compute_gdpo_advantage",
        description="Per-reward-component group normalisation, weighted sum, batch whitening",
        requires=frozenset({"reward_components"}),
        paper="GDPO: Group reward-Decoupled Normalization Policy Optimization, "
              "arXiv:2601.05242")),
    ("reinforce_plus_plus", (f"{_RET}:compute_reinforce_plus_plus_advantage", {
        "description": "Discounted return-to-go whitened over the batch (no critic)",
        "requires": frozenset(), "group_based": False, "paper": "REINFORCE++, arXiv:2501.03262"})),
    ("reinforce_plus_plus_baseline", _group_relative(
        "compute_reinforce_plus_plus_baseline_advantage",
        description="Group-mean baseline, then whitened over the batch",
        paper="REINFORCE++, arXiv:2501.03262")),
    ("remax", (f"{_RET}:compute_remax_advantage", {
        "description": "Return minus the reward of a greedy rollout of the same prompt",
        "requires": frozenset({"reward_baselines"}), "group_based": False,
        "paper": "ReMax, arXiv:2310.10505"})),
    ("rloo", _group_relative(
        "compute_rloo_advantage",
        description="Leave-one-out baseline: mean reward of the other samples of the group",
        paper="Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human "
              "Feedback in LLMs (RLOO), arXiv:2402.14740")),
    ("opo", _group_relative(
        "compute_opo_advantage",
        description="Length-weighted group-mean baseline (optimal for on-policy PG)",
        paper="On-Policy RL with Optimal Reward Baseline (OPO), arXiv:2505.23585")),
    ("gpg", _group_relative(
        "compute_gpg_advantage",
        description="Group-centred reward scaled by B / #non-zero rewards",
        paper="GPG: A Simple and Strong Reinforcement Learning Baseline for Model Reasoning, "
              "arXiv:2504.02546")),
    ("optimal_token_baseline", _otb(
        "compute_optimal_token_baseline_advantage",
        "Per-token group baseline weighted by cumulative path variance")),
    ("tir_optimal_token_baseline", _otb(
        "compute_tir_optimal_token_baseline_advantage",
        "Optimal token baseline over valid tokens of multi-turn (tool) responses")),
]]
