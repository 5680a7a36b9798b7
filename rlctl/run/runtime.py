"""Starting and stopping Ray for a run, bound to loopback unless a cluster address is given.

A cluster rlctl starts itself listens on 127.0.0.1 only, keeps its files in a private
per-user, per-run directory (:mod:`rlctl.run.ray_dirs`; stale ones of ended runs are
removed first) and requires Ray's token authentication: a random token, written 0600 into
that directory and found by every Ray process through ``RAY_AUTH_TOKEN_PATH``, so another
local user cannot join the cluster and run code in it. ``RAY_AUTH_MODE=disabled`` in the
environment opts out. Joining ``resources.address`` is checked first
(:mod:`rlctl.run.ray_address`): a dead address fails in seconds, naming it.
"""

from __future__ import annotations

import logging
import os
import secrets

from rlctl.run.ray_dirs import RunDir

# Environment every process of a run needs, wherever it runs. Set before Ray starts so that
# the raylet, the workers and transferqueue's ZMQ sockets inherit it.
RUN_ENV = {
    "RAY_DEDUP_LOGS": "0",
    "TQ_LOGGING_LEVEL": "ERROR",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}
# And for a cluster rlctl starts on this machine: every socket on loopback. Not when joining
# a cluster (``resources.address``): its nodes reach each other at their own addresses, and
# gloo / NCCL follow the rendezvous address's interface (rlctl.engines.rendezvous).
LOOPBACK_ENV = {
    # Ray binds to the machine IP by default; this keeps every socket on 127.0.0.1.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "GLOO_SOCKET_IFNAME": "lo",
}


def cluster_address(address: str | None) -> str | None:
    """The cluster a run joins: ``resources.address``, else ``RAY_ADDRESS`` (what ``ray job
    submit`` sets for its driver, and what Ray's own tools read); ``None``: start a private
    local cluster."""
    return address or os.environ.get("RAY_ADDRESS") or None


# Which kind of cluster the run's processes are in. Plugins opened from options alone (the
# transferqueue plane's loopback check) read it: a joined cluster's nodes bind the node
# addresses its operator gave them, a private one binds loopback only.
CLUSTER_KIND_VAR = "RLCTL_RAY_CLUSTER"


def run_env(*, joining: bool) -> dict[str, str]:
    """The variables :func:`apply_run_env` sets (``joining``: a cluster at an address)."""
    if joining:
        return {**RUN_ENV, CLUSTER_KIND_VAR: "joined"}
    return {**RUN_ENV, **LOOPBACK_ENV, CLUSTER_KIND_VAR: "private"}


def apply_run_env(*, joining: bool = False) -> None:
    """Export :func:`run_env` into this process (values already set win)."""
    env = run_env(joining=joining)
    for key, value in env.items():
        os.environ.setdefault(key, value)
    # Not a setting of the user's: what this run is in (a process that ran another first,
    # as a test session does, must not keep that one's).
    os.environ[CLUSTER_KIND_VAR] = env[CLUSTER_KIND_VAR]


_AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN")
_started: dict[str, object] = {}  # the run directory and the auth variables to restore


def start_ray(*, address: str | None, num_cpus: int | None, worker_logs: bool = True) -> bool:
    """Start (or join) Ray. Returns True when this call started it (and so must stop it).

    With no address, a private local cluster starts on loopback without the dashboard:
    the dashboard costs a second of start-up and a port we do not need.

    Ray's own driver messages below WARNING (``Started a local Ray instance.``, ``Connected
    to Ray cluster``) are not the user's business: rlctl starts Ray for them. ``worker_logs``:
    forward what Ray's worker processes print to this terminal (Ray mode, where they are the
    run's workers); ``--local`` passes False, its only Ray processes being the data plane's.
    """
    apply_run_env(joining=bool(address))
    import ray

    if ray.is_initialized():
        return False
    quiet = {"log_to_driver": worker_logs, "logging_level": logging.WARNING}
    if address:
        from rlctl.run.ray_address import check_cluster_address

        check_cluster_address(address)
        # The workers on every node get the run's settings (not the loopback ones).
        ray.init(address=address, runtime_env={"env_vars": run_env(joining=True)}, **quiet)
        return True
    from rlctl.run.ray_dirs import clean_stale_runs, new_run_dir, private_base

    base = private_base()
    clean_stale_runs(base)
    run_dir = new_run_dir(base)
    saved = {k: os.environ.get(k) for k in _AUTH_VARS}
    _started.update(run_dir=run_dir, saved_env=saved)
    try:
        _require_token_auth(run_dir)
        cpus = num_cpus or os.cpu_count() or 1
        ray.init(
            num_cpus=cpus,
            include_dashboard=False,
            _temp_dir=str(run_dir.path),
            # Small object store: tensors of one step, not a dataset. 30% of RAM is the default.
            object_store_memory=min(2 * 1024**3, _ram_bytes() // 8),
            runtime_env={"env_vars": {k: os.environ[k] for k in run_env(joining=False)}},
            **quiet,
        )
    except BaseException:
        _release()
        raise
    return True


def _require_token_auth(run_dir: RunDir) -> None:
    """Token auth for the cluster about to start, unless the environment turned it off."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "disabled":
        return
    token = run_dir.path / "auth_token"
    fd = os.open(token, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(token)
    os.environ.pop("RAY_AUTH_TOKEN", None)  # it would win over the file
    _refresh_ray_config()


def _refresh_ray_config() -> None:
    """Ray caches its config (the auth mode) and the token per process: reread both."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _release() -> None:
    run_dir = _started.pop("run_dir", None)
    saved = _started.pop("saved_env", None)
    if isinstance(saved, dict):
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _refresh_ray_config()
    if isinstance(run_dir, RunDir):
        run_dir.release()


def stop_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
    _release()


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 1024**3
