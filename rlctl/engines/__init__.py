"""Training and rollout engines: batch layout, protocols, FSDP2 and HF implementations."""
