"""The RL math: advantage estimators, policy losses, KL, loss aggregation, entropy.

Pure tensor functions taking plain options (never a config object). Look estimators and
losses up by their registered name, third-party plugins included::

    from rlctl.algorithms import get_advantage_estimator, get_policy_loss

    estimator = get_advantage_estimator("rloo")
    advantages, returns = estimator(token_level_rewards=r, response_mask=m, index=uids)

    loss_fn = get_policy_loss("vanilla")
    loss, metrics = loss_fn(old_lp, lp, advantages, m, loss_agg_mode="token-mean",
                            clip_low=0.2, clip_high=0.28, clip_ratio_c=3.0)

Importing this package does not import torch; the helpers below are loaded on first use
(``from rlctl.algorithms import agg_loss`` works).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# public name -> "module:attr" (loaded lazily so that `import rlctl.algorithms` stays light)
_LAZY: dict[str, str] = {
    "agg_loss": "rlctl.algorithms.aggregation:agg_loss",
    "loss_normalizer": "rlctl.algorithms.aggregation:loss_normalizer",
    "LOSS_AGG_MODES": "rlctl.algorithms.aggregation:LOSS_AGG_MODES",
    "kl_penalty": "rlctl.algorithms.kl:kl_penalty",
    "kl_loss": "rlctl.algorithms.kl:kl_loss",
    "apply_kl_penalty_to_rewards": "rlctl.algorithms.kl:apply_kl_penalty_to_rewards",
    "FixedKLController": "rlctl.algorithms.kl:FixedKLController",
    "AdaptiveKLController": "rlctl.algorithms.kl:AdaptiveKLController",
    "make_kl_controller": "rlctl.algorithms.kl:make_kl_controller",
    "entropy_from_logits": "rlctl.algorithms.entropy:entropy_from_logits",
    "sum_pi_squared_from_logits": "rlctl.algorithms.entropy:sum_pi_squared_from_logits",
    "entropy_bonus": "rlctl.algorithms.entropy:entropy_bonus",
    "truncated_is_weights": "rlctl.algorithms.off_policy:truncated_is_weights",
    "OffPolicyCorrection": "rlctl.algorithms.off_policy:OffPolicyCorrection",
    "compute_value_loss": "rlctl.algorithms.value_loss:compute_value_loss",
    "masked_mean": "rlctl.algorithms.masked:masked_mean",
    "masked_whiten": "rlctl.algorithms.masked:masked_whiten",
}

# The lazy names are _LAZY's string keys (resolved by __getattr__ on first use).
__all__ = ["get_advantage_estimator", "get_policy_loss", *_LAZY]  # noqa: PLE0604


def get_advantage_estimator(name: str) -> Callable[..., Any]:
    """The advantage estimator registered as ``name`` (built-in or third-party).

    Raises :class:`rlctl.registry.RegistryError` listing the registered names when unknown.
    """
    from rlctl.registry import get_registry

    return get_registry().load("advantage_estimator", name)


def get_policy_loss(name: str) -> Callable[..., Any]:
    """The policy loss registered as ``name`` (built-in or third-party)."""
    from rlctl.registry import get_registry

    return get_registry().load("policy_loss", name)


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'rlctl.algorithms' has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value
