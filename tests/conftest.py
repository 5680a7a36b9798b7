"""Top-level test set-up, kept minimal (each area has its own conftest).

Typer reads the terminal width and colour settings *when it is imported*, so they are set
here, before any test module imports the CLI: help-text snapshots must not depend on the
terminal that runs the tests. (``_TYPER_FORCE_DISABLE_TERMINAL`` wins over ``FORCE_COLOR``
and ``GITHUB_ACTIONS``.)
"""

import os
from typing import Any

import pytest

from tests.worker_units import longest_units_first, make_scheduler

os.environ["TERMINAL_WIDTH"] = "100"
os.environ["_TYPER_FORCE_DISABLE_TERMINAL"] = "1"
os.environ["NO_COLOR"] = "1"


def _one_share_of_the_cores() -> None:
    """Under pytest-xdist (``-n N``): each worker's torch, and what it starts (``--local``
    runs, servers, Ray workers inherit it), gets its share of the CPUs in ``OMP_NUM_THREADS``.
    Two workers each spinning as many OpenMP threads as the machine has cores slowed a
    training test 5x (14 -> 80 s) on 2 cores."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = str(max(1, len(os.sched_getaffinity(0)) // int(workers)))


_one_share_of_the_cores()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a serial run keeps the files' order
        longest_units_first(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n N --dist=loadfile`` (pyproject's default) one worker runs a module, or a
    package that shares a server, whole (:mod:`tests.worker_units`)."""
    return make_scheduler(config, log) if config.getvalue("dist") == "loadfile" else None
