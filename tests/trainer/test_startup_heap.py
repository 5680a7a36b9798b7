"""freeze_startup_heap: start-up objects leave the collector's passes; later garbage does not."""

from __future__ import annotations

import gc
import weakref

from rlctl.trainer.startup_heap import freeze_startup_heap


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_frozen_objects_are_skipped_and_new_cycles_are_still_collected() -> None:
    freeze_startup_heap()
    try:
        assert gc.get_freeze_count() > 0
        node = _Node()
        ref = weakref.ref(node)
        del node
        gc.collect()
        assert ref() is None  # made after the freeze: collected as usual
    finally:
        gc.unfreeze()  # leave the test process as it was
