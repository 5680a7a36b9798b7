"""Reward functions: each scores one sample and returns a float or a dict with ``score``."""

from rlctl.rewards.base import RewardInput

__all__ = ["RewardInput"]
