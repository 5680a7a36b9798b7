"""Built-in environments, the ``env_reward`` reward and the ``env`` loop's task (issue 15)."""

from __future__ import annotations

from rlctl.hookspecs import hookimpl


@hookimpl
def register_environments(register) -> None:  # type: ignore[no-untyped-def]
    from rlctl.agents.builtin_envs import GuessDigitOptions

    register(
        "guess_digit",
        "rlctl.agents.builtin_envs:GuessDigit",
        options=GuessDigitOptions,
        description="find a hidden digit from higher (+) / lower (-) feedback",
    )


def env_reward(sample, **options) -> float:  # type: ignore[no-untyped-def]
    """The environment's summed step rewards (``extra["env_reward"]``, set by the env loop)."""
    if "env_reward" not in sample.extra:
        raise KeyError(
            "no env_reward in the sample: the env_reward reward function scores "
            'outputs of the env agent loop ([rollout] agent_loop = "env")'
        )
    return float(sample.extra["env_reward"])


@hookimpl
def register_reward_functions(register) -> None:  # type: ignore[no-untyped-def]
    register(
        "env_reward",
        env_reward,
        description="the environment's summed step rewards (env agent loop)",
    )


@hookimpl
def register_tasks(register) -> None:  # type: ignore[no-untyped-def]
    from rlctl.tasks.agent_tasks import GuessDigitTaskOptions

    register(
        "guess_digit",
        "rlctl.tasks.agent_tasks:guess_digit",
        options=GuessDigitTaskOptions,
        description="'?' with a hidden digit, for the guess_digit environment",
        reward="env_reward",
    )
