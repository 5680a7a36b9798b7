"""The contract kit on a third-party-style plane that keeps ``DataPlaneBase``'s default
``kv_watch_changes`` (a snapshot per answer): the default is correct under every test."""

import pytest

from rlctl.dataplane import open_data_plane
from rlctl.dataplane.contract import DataPlaneBase
from rlctl.testing.dataplane_contract import DataPlaneContract


class _SyncCallsOnly(DataPlaneBase):
    """Writes the sync calls only (here by handing them to a memory plane); the async twins
    and kv_watch_changes come from DataPlaneBase."""

    def __init__(self) -> None:
        self.inner = open_data_plane("memory", {}, run_id="default-changes")

    def __reduce__(self):
        raise TypeError("single-process plane")

    def kv_put(self, key, partition_id, fields=None, tag=None):
        self.inner.kv_put(key, partition_id, fields, tag)

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        self.inner.kv_batch_put(keys, partition_id, fields, tags)

    def kv_batch_get(self, keys, partition_id, fields, *, layout="jagged", pad_value=0):
        return self.inner.kv_batch_get(keys, partition_id, fields, layout=layout,
                                       pad_value=pad_value)

    def kv_list(self, partition_id):
        return self.inner.kv_list(partition_id)

    def kv_clear(self, keys, partition_id):
        self.inner.kv_clear(keys, partition_id)

    def kv_watch(self, partition_id, version, timeout):
        return self.inner.kv_watch(partition_id, version, timeout)

    def close(self):
        self.inner.close()


class TestDefaultChangesContract(DataPlaneContract):
    multi_process = False
    incremental_changes = False

    @pytest.fixture
    def plane(self):
        plane = _SyncCallsOnly()
        yield plane
        plane.close()
