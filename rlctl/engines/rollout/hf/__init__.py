"""The ``hf`` rollout engine (transformers generate, in-process) and its options."""
