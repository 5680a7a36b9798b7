"""The hook implementations rlctl calls (entry point ``rlctl`` -> ``example``).

Keep this module light: rlctl imports it for ``rlctl --help`` and ``rlctl plugins list``,
which must not import torch. Heavy implementations are registered as ``"module:attr"``
strings and imported only when a run selects them.
"""

from __future__ import annotations

from rlctl.hookspecs import hookimpl

REWARD = "numeric_closeness"
ESTIMATOR = "median_baseline"


@hookimpl
def register_reward_functions(register) -> None:  # type: ignore[no-untyped-def]
    # The option models are pydantic classes: imported when rlctl asks for registrations,
    # not when it loads this module (`rlctl --help` loads it and imports no pydantic).
    from rlctl_plugin_example.options import NumericClosenessOptions

    register(
        REWARD,
        "rlctl_plugin_example.rewards:numeric_closeness",
        options=NumericClosenessOptions,
        description="partial credit for numbers close to the answer (first number in the response)",
    )


@hookimpl
def register_advantage_estimators(register) -> None:  # type: ignore[no-untyped-def]
    from rlctl_plugin_example.options import MedianBaselineOptions

    register(
        ESTIMATOR,
        "rlctl_plugin_example.estimators:median_baseline_advantage",
        options=MedianBaselineOptions,
        description="group-relative advantage against the group median (robust to outliers)",
        requires=frozenset(),
        group_based=True,
    )


@hookimpl
def validate_config(recipe):  # type: ignore[no-untyped-def]
    """A median of two responses is their mean: ask for groups of 3 or more."""
    from rlctl.config.problems import ConfigProblem

    if recipe.algorithm.estimator == ESTIMATOR and recipe.algorithm.group_size < 3:
        return [
            ConfigProblem(
                "algorithm.group_size",
                f"{ESTIMATOR} needs at least 3 responses per prompt, got "
                f"{recipe.algorithm.group_size}",
                "set algorithm.group_size >= 3 (e.g. 8)",
            )
        ]
    return []
