"""Built-in rewards (``[[rewards]] name = NAME``).

Rule functions are pure Python (no torch). ``kind`` metadata says where a reward runs
(:data:`rlctl.rewards.reward_set.REWARD_KINDS`): ``llm_judge`` asks the rollout engine,
``reward_model`` scores batches in the reward worker group. Targets are lazy strings, so
this module imports neither torch nor transformers.
"""

from __future__ import annotations

from rlctl.hookspecs import hookimpl


@hookimpl
def register_reward_functions(register) -> None:  # type: ignore[no-untyped-def]
    # Imported on use: the registry imports this module for `rlctl --help` (no pydantic).
    from rlctl.rewards.gsm8k import Gsm8kOptions
    from rlctl.rewards.judge import LLMJudgeOptions
    from rlctl.rewards.match import DigitsMatchOptions, ExactMatchOptions
    from rlctl.rewards.reasoning_gym_reward import ReasoningGymRewardOptions
    from rlctl.rewards.reward_model import RewardModelOptions
    from rlctl.rewards.shaping import LengthPenaltyOptions
    register(
        "digits_match",
        "rlctl.rewards.match:digits_match",
        options=DigitsMatchOptions,
        description="correct positions / max(target, completion length), cut at the first eos",
    )
    register(
        "exact_match",
        "rlctl.rewards.match:exact_match",
        options=ExactMatchOptions,
        description="1 when the completion equals the answer, else 0",
    )
    register(
        "gsm8k",
        "rlctl.rewards.gsm8k:gsm8k",
        options=Gsm8kOptions,
        description="final number (after '####', or the last one) equals the answer",
    )
    register(
        "reasoning_gym",
        "rlctl.rewards.reasoning_gym_reward:reasoning_gym",
        options=ReasoningGymRewardOptions,
        description="the reasoning-gym task's own verifier on the extracted answer",
    )
    register(
        "length_penalty",
        "rlctl.rewards.shaping:length_penalty",
        options=LengthPenaltyOptions,
        description="shaping term in [-1, 0] that grows with response length",
    )
    register(
        "llm_judge",
        "rlctl.rewards.judge:LLMJudge",
        options=LLMJudgeOptions,
        description="generative judge: the rollout engine rates the response, a number is parsed",
        kind="judge",
    )
    register(
        "reward_model",
        "rlctl.rewards.reward_model:SequenceClassifierReward",
        options=RewardModelOptions,
        description="discriminative reward model: an HF sequence-classification checkpoint",
        kind="model",
    )
