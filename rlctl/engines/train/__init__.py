"""Training engines: the ModelEngine contract, the padded batch, optimiser/LR, FSDP2 and
Megatron-core.

``log_probs``: the one ``token_log_probs`` every engine (and the rollout parity contract) scores
with.
"""
