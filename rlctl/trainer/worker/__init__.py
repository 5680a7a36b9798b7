"""Worker-side trainer code: runs inside training / rollout worker processes (Ray actors or
--local)."""
