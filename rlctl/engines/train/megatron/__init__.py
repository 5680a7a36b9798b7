"""The ``megatron`` training engine (Megatron-core TP/PP/DP), its options, HF<->mcore mapping."""
