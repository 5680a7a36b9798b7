"""The sync trainer: a single controller that dispatches only metadata to worker groups."""
