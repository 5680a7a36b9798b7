"""Whether a step needs the separate old log-prob forward, or the update's own forward does.

The old log-probs are the policy's log-probs of the step's samples before this step's
update. With one epoch and one minibatch the update's single forward runs on exactly those
weights and samples, so its detached log-probs *are* the old log-probs: the ratio is 1 and
its gradient is the policy gradient (verl and TRL skip the pass there too). Everything else
needs the pass: a second minibatch or epoch trains on weights the first one changed; a
streaming step trains samples that older weights generated; an estimator or the KL-in-reward
penalty reads old log-probs before the update runs; an off-policy correction
(``[algorithm.correction]``, or the old ``tis_cap``) weighs by old over rollout probabilities.
"""

from __future__ import annotations

from typing import Any

from rlctl.config.recipe import Recipe


def old_log_prob_pass_needed(
    recipe: Recipe, registry: Any, *, streaming: bool, max_staleness: int = 0
) -> str | None:
    """Why the step runs the old log-prob forward (a phrase), or ``None``: the update's
    forward provides them (``[algorithm] old_log_prob_pass = "auto"`` and provably on-policy).
    ``max_staleness``: the staleness policy's bound (it resolves ``correction = "auto"``)."""
    from rlctl.algorithms.off_policy import resolve_correction

    alg = recipe.algorithm
    if alg.old_log_prob_pass == "always":
        return 'algorithm.old_log_prob_pass = "always"'
    if alg.epochs != 1 or alg.minibatches != 1:
        return f"{alg.epochs} epoch(s) x {alg.minibatches} minibatch(es): later ones are off-policy"
    if streaming:
        return f"the {alg.staleness.policy!r} staleness policy streams (samples of older weights)"
    if alg.kl.apply_in == "reward":
        return "the KL penalty in the reward reads old log-probs before the update"
    correction = resolve_correction(alg.correction, tis_cap=alg.loss.tis_cap,
                                    max_staleness=max_staleness)
    if correction.active:
        return f"the {correction.method!r} off-policy correction weighs by them"
    requires = registry.get("advantage_estimator", alg.estimator).metadata.get("requires", ())
    if "old_log_probs" in requires:
        return f"the {alg.estimator!r} estimator reads them"
    return None
