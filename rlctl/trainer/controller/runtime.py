"""Starting and stopping Ray for a run, bound to loopback unless a cluster address is given."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# Environment every process of a run needs on a CPU box. Set before Ray starts so that the
# raylet, the workers and transferqueue's ZMQ sockets inherit it.
LOOPBACK_ENV = {
    # Ray binds to the machine IP by default; this keeps every socket on 127.0.0.1.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    # Ray 2.60 turns token auth on and writes a token file into $HOME otherwise.
    "RAY_AUTH_MODE": "disabled",
    "RAY_DEDUP_LOGS": "0",
    "TQ_LOGGING_LEVEL": "ERROR",
    "GLOO_SOCKET_IFNAME": "lo",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def apply_loopback_env() -> None:
    """Export :data:`LOOPBACK_ENV` into this process (values already set win)."""
    for key, value in LOOPBACK_ENV.items():
        os.environ.setdefault(key, value)


def start_ray(*, address: str | None, num_cpus: int | None) -> bool:
    """Start (or join) Ray. Returns True when this call started it (and so must stop it).

    With no address, a private local cluster starts on loopback without the dashboard:
    the dashboard costs a second of start-up and a port we do not need.
    """
    apply_loopback_env()
    import ray

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=True)
        return True
    cpus = num_cpus or os.cpu_count() or 1
    tmp = Path(tempfile.gettempdir()) / "rlctl-ray"
    tmp.mkdir(parents=True, exist_ok=True)
    ray.init(
        num_cpus=cpus,
        include_dashboard=False,
        log_to_driver=True,
        _temp_dir=str(tmp),
        # Small object store: tensors of one step, not a dataset. 30% of RAM is the default.
        object_store_memory=min(2 * 1024**3, _ram_bytes() // 8),
        runtime_env={"env_vars": {k: os.environ[k] for k in LOOPBACK_ENV}},
    )
    return True


def stop_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 1024**3
