"""The trainer: a single controller that dispatches only metadata to worker groups.

``controller/`` runs in the controller process (the ``rlctl train`` driver); ``worker/`` runs
inside training and rollout workers (Ray actors, or objects in the same process in ``--local``).
"""
