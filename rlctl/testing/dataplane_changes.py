"""The listing's versions and changes: what a watcher of a partition relies on.

Part of :class:`rlctl.testing.dataplane_contract.DataPlaneContract` (its base class): the
version moves exactly when the listing changes, ``kv_watch`` waits for it, and
``kv_watch_changes`` answers what changed since a version (a snapshot from ``-1``), which
applied to a copy of the listing gives ``kv_list``. A plane that keeps
:class:`~rlctl.dataplane.contract.DataPlaneBase`'s default ``kv_watch_changes`` (a snapshot
on every answer) sets ``incremental_changes = False``.
"""

from __future__ import annotations

import threading
import time
import uuid

import torch


def keys_of_a_new_uid(n: int, prefix: str | None = None) -> list[str]:
    """``n`` fresh sample keys (a new uid prefix unless ``prefix`` is given)."""
    uid = prefix or uuid.uuid4().hex[:12]
    return [f"{uid}{i}_0_0" for i in range(n)]


_keys = keys_of_a_new_uid


class ListingChangesContract:
    """Versions, ``kv_watch`` and ``kv_watch_changes``."""

    incremental_changes: bool = True
    """Whether ``kv_watch_changes`` answers only what changed (a delta) after a version it
    issued; ``False`` for a plane that keeps :class:`~rlctl.dataplane.contract.DataPlaneBase`'s
    default, which answers a snapshot every time (correct, but a watcher pays the partition's
    size per change)."""
    clear_many: int = 3000
    """Keys the clear-history test clears at once (more than a plane's kept history)."""

    def test_watch_wakes_on_tag_change_and_times_out(self, plane, partition):
        key = _keys(1)[0]
        version = plane.kv_watch(partition, -1, 0)
        t0 = time.monotonic()
        assert plane.kv_watch(partition, version, 0.2) == version
        assert time.monotonic() - t0 >= 0.15
        timer = threading.Timer(
            0.1, plane.kv_put, args=(key, partition), kwargs={"tag": {"status": "success"}}
        )
        timer.start()
        t0 = time.monotonic()
        new = plane.kv_watch(partition, version, 10)
        assert new > version and time.monotonic() - t0 < 5
        timer.join(timeout=10)

    # What a watcher following a partition relies on (the ReplayBuffer does): the version moves
    # whenever the listing changes, and kv_watch_changes answers with what changed.
    def test_the_version_moves_exactly_when_the_listing_changes(self, plane, partition):
        keys = _keys(3)
        v0 = plane.kv_watch(partition, -1, 0)
        plane.kv_batch_put(keys[:2], partition, {"v": torch.zeros(2)})  # creates keys
        v1 = plane.kv_watch(partition, -1, 0)
        assert v1 > v0
        plane.kv_batch_put(keys[:2], partition, {"w": torch.ones(2)})  # fields only: no change
        plane.kv_batch_put(keys[:2], partition, tags=[{}, {}])  # empty tags: no change
        assert plane.kv_watch(partition, -1, 0) == v1
        plane.kv_put(keys[0], partition, tag={"status": "success"})
        v2 = plane.kv_watch(partition, -1, 0)
        assert v2 > v1
        plane.kv_clear([keys[1]], partition)
        assert plane.kv_watch(partition, -1, 0) > v2

    def test_changes_from_minus_one_are_a_snapshot_of_the_listing(self, plane, partition):
        keys = _keys(3)
        plane.kv_batch_put(keys, partition, tags=[{"status": "running", "i": i} for i in range(3)])
        plane.kv_clear(keys[1:2], partition)
        changes = plane.kv_watch_changes(partition, -1, 0)
        assert changes.complete and changes.removed == ()
        assert changes.version == plane.kv_watch(partition, -1, 0)
        assert changes.changed == plane.kv_list(partition)
        changes.changed[keys[0]]["status"] = "tampered"  # copies, like kv_list
        assert plane.kv_list(partition)[keys[0]]["status"] == "running"
        empty = plane.kv_watch_changes(partition + "never", -1, 0)
        assert empty.changed == {} and empty.removed == ()

    def test_changes_since_a_version_are_only_what_changed(self, plane, partition):
        keys = _keys(5)
        plane.kv_batch_put(keys[:4], partition, tags=[{"status": "running"}] * 4)
        held = plane.kv_watch_changes(partition, -1, 0)
        listing = dict(held.changed)
        plane.kv_put(keys[1], partition, tag={"status": "success", "seq_len": 7})
        plane.kv_put(keys[4], partition, {"x": torch.zeros(2)})  # a key created by fields
        plane.kv_batch_put(keys[:1], partition, {"x": torch.zeros(1, 2)})  # no listing change
        plane.kv_clear([keys[2]], partition)
        plane.kv_clear([keys[3]], partition)
        plane.kv_put(keys[3], partition, tag={"status": "again"})  # cleared, then back
        changes = plane.kv_watch_changes(partition, held.version, 0)
        assert changes.version == plane.kv_watch(partition, -1, 0) > held.version
        if self.incremental_changes:
            assert not changes.complete
            assert changes.changed == {
                keys[1]: {"status": "success", "seq_len": 7},
                keys[4]: {},
                keys[3]: {"status": "again"},
            }
            assert list(changes.changed) == [keys[1], keys[4], keys[3]]  # oldest change first
            assert changes.removed == (keys[2],)
        changes.apply(listing)
        assert listing == plane.kv_list(partition)
        same = plane.kv_watch_changes(partition, changes.version, 0)
        assert same.version == changes.version
        assert same.complete or (same.changed == {} and same.removed == ())

    def test_an_answer_stays_as_it_was_after_later_changes(self, plane, partition):
        keys = _keys(2)
        plane.kv_batch_put(keys, partition, tags=[{"status": "running", "n": 1}] * 2)
        first = plane.kv_watch_changes(partition, -1, 0)
        plane.kv_put(keys[0], partition, tag={"status": "success"})
        plane.kv_batch_put(keys[1:], partition, tags=[{"n": 2}])
        second = plane.kv_watch_changes(partition, first.version, 0)
        # a plane may share its dicts with an answer, never change them afterwards
        assert first.changed == {k: {"status": "running", "n": 1} for k in keys}
        assert second.changed[keys[0]] == {"status": "success", "n": 1}
        assert second.changed[keys[1]] == {"status": "running", "n": 2}
        assert plane.kv_list(partition)[keys[0]] == {"status": "success", "n": 1}

    def test_watch_changes_waits_for_a_change_and_times_out(self, plane, partition):
        keys = _keys(2)
        plane.kv_put(keys[0], partition, tag={"status": "running"})
        held = plane.kv_watch_changes(partition, -1, 0)
        t0 = time.monotonic()
        quiet = plane.kv_watch_changes(partition, held.version, 0.2)
        assert time.monotonic() - t0 >= 0.15 and quiet.version == held.version
        assert quiet.complete or (quiet.changed == {} and quiet.removed == ())
        timer = threading.Timer(
            0.1, plane.kv_put, args=(keys[1], partition), kwargs={"tag": {"status": "success"}}
        )
        timer.start()
        t0 = time.monotonic()
        woken = plane.kv_watch_changes(partition, held.version, 10)
        assert woken.version > held.version and time.monotonic() - t0 < 5
        listing = dict(held.changed)
        woken.apply(listing)
        assert listing == {keys[0]: {"status": "running"}, keys[1]: {"status": "success"}}
        timer.join(timeout=10)

    def test_a_version_the_plane_never_issued_gets_a_snapshot_at_once(self, plane, partition):
        keys = _keys(2)
        plane.kv_batch_put(keys, partition, tags=[{"s": 1}, {"s": 2}])
        t0 = time.monotonic()
        changes = plane.kv_watch_changes(partition, 10**9, 5)  # e.g. from a replaced index
        assert time.monotonic() - t0 < 2.5
        assert changes.complete and changes.changed == plane.kv_list(partition)

    def test_changes_after_many_clears_still_rebuild_the_listing(self, plane, partition):
        """However much was cleared since a version (past any history a plane keeps), the
        answer brings a copy of that version's listing to the current one."""
        keys = _keys(self.clear_many)
        plane.kv_batch_put(keys, partition, tags=[{"i": i} for i in range(len(keys))])
        held = plane.kv_watch_changes(partition, -1, 0)
        listing = dict(held.changed)
        plane.kv_clear(keys[1:], partition)
        plane.kv_put(keys[1], partition, tag={"back": True})
        changes = plane.kv_watch_changes(partition, held.version, 0)
        changes.apply(listing)
        assert listing == plane.kv_list(partition) == {keys[0]: {"i": 0}, keys[1]: {"back": True}}

