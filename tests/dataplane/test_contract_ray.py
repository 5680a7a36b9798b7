"""The shared contract on the ``ray`` backend (one session-scoped cluster)."""

import pytest

from rlctl.testing.dataplane_contract import DataPlaneContract

pytestmark = pytest.mark.slow


class TestRayContract(DataPlaneContract):
    multi_process = True

    @pytest.fixture
    def plane(self, ray_plane_session):
        return ray_plane_session


@pytest.fixture(scope="module")
def store_plane(ray_cluster):
    from rlctl.dataplane import open_data_plane

    plane = open_data_plane("ray", {"inline_max_bytes": 0}, run_id="tests-store")
    yield plane
    plane.close()


class TestRayContractThroughTheObjectStore(DataPlaneContract):
    """Every put through the object store (none inline): the reserve-copy-commit path."""

    multi_process = True

    @pytest.fixture
    def plane(self, store_plane):
        return store_plane
