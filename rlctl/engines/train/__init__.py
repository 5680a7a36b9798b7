"""Training engines: the ModelEngine contract, the padded batch, optimiser/LR, FSDP2 and Megatron-core."""
