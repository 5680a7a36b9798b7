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

    started = not ray.is_initialized()  # another suite's session cluster is reused, not shut
    if started:
        ray.init(
            num_cpus=4,
            include_dashboard=False,
            object_store_memory=1 * 1024**3,
            _temp_dir=tempfile.mkdtemp(prefix="rlctl-ray-"),
            log_to_driver=False,
        )
    yield ray
    if started:
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


def pytest_configure(config):
    # Ray object-store reads are read-only numpy views by design; the data plane copies out of
    # them (or hands them out as documented with zero_copy_reads). torch warns once about it.
    config.addinivalue_line("filterwarnings", "ignore:The given NumPy array is not writable")
