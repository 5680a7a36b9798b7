"""One Ray cluster (and one TransferQueue) for the whole data-plane test session."""

from __future__ import annotations

import os
import tempfile

import pytest

# Loopback only, no auth-token file, quiet TQ: set before Ray starts so workers inherit them.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TQ_LOGGING_LEVEL", "ERROR")


@pytest.fixture(scope="session")
def ray_cluster():
    import ray

    if not ray.is_initialized():
        ray.init(
            num_cpus=4,
            include_dashboard=False,
            object_store_memory=1 * 1024**3,
            _temp_dir=tempfile.mkdtemp(prefix="rlctl-ray-"),
            log_to_driver=False,
        )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def ray_plane_session(ray_cluster):
    from rlctl.dataplane import open_data_plane

    plane = open_data_plane("ray", {}, run_id="tests")
    yield plane
    plane.close()


@pytest.fixture(scope="session")
def tq_plane_session(ray_cluster):
    from rlctl.dataplane import open_data_plane

    plane = open_data_plane("transferqueue", {}, run_id="tests")
    yield plane
    plane.close()
