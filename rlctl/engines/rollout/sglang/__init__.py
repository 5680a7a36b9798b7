"""The ``sglang`` rollout engine: SGLang servers, their command line and weight sync."""
