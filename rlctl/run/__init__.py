"""A run's life in the controller process: start, lock, checkpoint, stop (``rlctl train``)."""
