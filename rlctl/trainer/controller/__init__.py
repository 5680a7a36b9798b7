"""Controller-side trainer code: runs in the single controller process (the ``rlctl train``
driver)."""
