"""The shared contract on the in-process ``memory`` backend."""

import pytest

from rlctl.dataplane import open_data_plane
from rlctl.testing.dataplane_contract import DataPlaneContract


class TestMemoryContract(DataPlaneContract):
    multi_process = False

    @pytest.fixture
    def plane(self):
        plane = open_data_plane("memory", {}, run_id="t")
        yield plane
        plane.close()
