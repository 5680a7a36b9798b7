"""The shared contract on the ``transferqueue`` backend (TQ really started, shared cluster)."""

import pytest

from rlctl.testing.dataplane_contract import DataPlaneContract

pytestmark = pytest.mark.slow


class TestTransferQueueContract(DataPlaneContract):
    multi_process = True
    concurrency_puts = 1000  # each TQ put is a few ms of ZMQ round trips on 2 cores

    @pytest.fixture
    def plane(self, tq_plane_session):
        return tq_plane_session
