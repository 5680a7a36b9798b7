"""Prompt sources: synthetic verifiable tasks and verl-layout parquet files."""

from rlctl.tasks.prompt import Prompt, PromptSource, tokenize_prompt, tokenize_prompts

__all__ = ["Prompt", "PromptSource", "tokenize_prompt", "tokenize_prompts"]
