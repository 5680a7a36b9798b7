"""What one pytest-xdist worker runs whole (the README's command: ``-n 2``, pyproject's
``--dist=loadfile``): a test module, so its module-scoped fixtures (models, Ray clusters) are
built once and its tests run in their order on one process; and a package whose modules
share a server (:data:`SHARED_SERVER_PACKAGES`), so the server starts once.

xdist's own ``loadgroup`` would have served, but with pytest 9.2 it silently groups nothing
(it renames node ids through a field pytest no longer reads: pytest-xdist issue #1386), so
the root ``conftest.py`` hands xdist :class:`UnitScheduling` for ``loadfile`` instead.

The units go out longest first, as far as the collection can tell (most ``slow`` tests
first): a long unit started last would keep one worker busy while the other idles.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

SHARED_SERVER_PACKAGES = ("tests/engines/rollout/vllm", "tests/engines/rollout/sglang")
"""Packages whose modules share one server (:mod:`tests.engines.rollout.server.shared_server`
refuses a package missing here)."""


def unit_of(nodeid: str) -> str:
    """The unit a test belongs to: its shared-server package, else its module."""
    module = nodeid.split("::", 1)[0]
    for package in SHARED_SERVER_PACKAGES:
        if module.startswith(package + "/"):
            return package
    return module


def longest_units_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: units with more ``slow`` tests first, each unit's tests
    together and in their order (a stable sort)."""
    slow = Counter(unit_of(item.nodeid) for item in items if item.get_closest_marker("slow"))
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(unit_of(item.nodeid), len(first_seen))
    items.sort(key=lambda item: (-slow[unit_of(item.nodeid)], first_seen[unit_of(item.nodeid)]))


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's ``loadfile`` scheduler with :func:`unit_of` as its unit, in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False  # the workers' collection order, longest first
    return UnitScheduling(config, log)
