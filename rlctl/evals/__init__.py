"""rlctl eval: scoring models on held-out prompts (pass@1, mean@k, pass@k)."""
