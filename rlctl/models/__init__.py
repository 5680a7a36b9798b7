"""Model and tokenizer construction: the offline tiny Qwen3 and local HF checkpoints."""
