"""One real server per engine package (``tests/engines/rollout/{sglang,vllm}``), not one per
module: a start costs 20-60 s of a 2-core machine's CPU and GBs of memory. Modules whose server
is started differently (vLLM's ``--enable-lora``, two replicas) keep their own.

The package's ``conftest.py`` starts it (a package-scoped fixture) and orders the package's
tests with :func:`order_around_the_shared_server`: those that use it first, in file order, the
one that kills it on purpose (``@pytest.mark.kills_shared_server``) last among them, then the
package's other tests, so the shared server is up for one stretch and gone before the tests
that start servers of their own. Modules that use it start from the checkpoint's weights
(:func:`on_checkpoint_weights`): what one module's weight updates leave is no other's input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.worker_units import SHARED_SERVER_PACKAGES

KILLS = "kills_shared_server"


def order_around_the_shared_server(items: list[pytest.Item], package: Path,
                                   fixture: str) -> None:
    """Reorder, in place and within ``package`` only, the tests that use ``fixture`` first,
    those marked ``kills_shared_server`` last among them, the package's others after."""
    if not any(package.match(f"*/{p}") for p in SHARED_SERVER_PACKAGES):
        raise RuntimeError(f"{package} shares a server among its modules: add it to "
                           "tests.worker_units.SHARED_SERVER_PACKAGES (one pytest-xdist worker "
                           "runs the package, on one server)")
    slots = [i for i, item in enumerate(items) if item.path.is_relative_to(package)]

    def rank(item: pytest.Item) -> int:
        if fixture not in getattr(item, "fixturenames", ()):
            return 2
        return 1 if item.get_closest_marker(KILLS) else 0

    for slot, item in zip(slots, sorted((items[i] for i in slots), key=rank), strict=True):
        items[slot] = item


def on_checkpoint_weights(engine: Any, sync: Callable[..., None],
                          state: Mapping[str, Any]) -> Any:
    """``engine`` with the checkpoint's weights (``state``) loaded again at the next version:
    a module that uses the shared server starts where a fresh server would."""
    sync(state, engine, engine.weight_version + 1)
    return engine
