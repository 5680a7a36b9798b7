"""Option models of the built-in data planes (``[data_plane.options]``); no heavy imports."""

from __future__ import annotations

from pydantic import BaseModel, Field, NonNegativeInt, PositiveFloat, PositiveInt

from rlctl.config.strict import STRICT_CONFIG


class MemoryOptions(BaseModel):
    """Options of the in-process ``memory`` data plane."""

    model_config = STRICT_CONFIG

    copy_on_put: bool = True
    """Copy put tensors so later in-place edits by the caller cannot change stored data."""


class RayOptions(BaseModel):
    """Options of the ``ray`` data plane (tensors in Ray's object store, an index actor)."""

    model_config = STRICT_CONFIG

    index_name: str | None = None
    """Name of the index actor; ``None`` derives ``rlctl-dataplane-<run_id>``."""
    namespace: str = "rlctl"
    """Ray namespace of the index actor."""
    call_timeout_s: PositiveFloat = 120.0
    """Seconds any single call to the index actor or object store may take before failing."""
    zero_copy_reads: bool = False
    """Return views of the object store where possible; writing into them corrupts stored data."""
    inline_max_bytes: NonNegativeInt = 65536
    """Puts of at most this many bytes (tensors, and the text of string fields) skip the object
    store and live in the index actor (one round trip); 0 sends every put through the object
    store."""


class TransferQueueOptions(BaseModel):
    """Options of the ``transferqueue`` data plane (TransferQueue 0.1.x carries the bytes)."""

    model_config = STRICT_CONFIG

    storage_units: PositiveInt = 1
    """SimpleStorage units to start (each is a Ray actor; one fits a 2-CPU machine)."""
    unit_num_cpus: float = Field(0.0, ge=0)
    """Ray CPUs each TransferQueue actor reserves (its default of 1 hangs 2-CPU machines)."""
    init_timeout_s: PositiveFloat = 120.0
    """Seconds ``tq.init`` may take before the backend fails instead of hanging."""
    call_timeout_s: PositiveFloat = 120.0
    """Seconds any single call to the index actor may take before failing."""
    loopback_only: bool | None = None
    """Refuse to start TQ unless Ray's node address (which TQ's ZMQ sockets bind to) is
    loopback. Unset: loopback is required unless the run joined a cluster at an address
    (``resources.address``), whose nodes bind the addresses their operator gave them."""
    logging_level: str = "ERROR"
    """``TQ_LOGGING_LEVEL`` for TransferQueue's own logs (it warns on every op otherwise)."""
