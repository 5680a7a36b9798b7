"""The shared contract on the ``ray`` backend (one session-scoped cluster)."""

import pytest

from rlctl.testing.dataplane_contract import DataPlaneContract

pytestmark = pytest.mark.slow


class TestRayContract(DataPlaneContract):
    multi_process = True

    @pytest.fixture
    def plane(self, ray_plane_session):
        return ray_plane_session
