"""The ``fsdp`` training engine (torch FSDP2) and its options."""
