"""The units pytest-xdist workers run whole (:mod:`tests.worker_units`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.worker_units import SHARED_SERVER_PACKAGES, longest_units_first, unit_of


def test_a_unit_is_a_module_or_a_package_that_shares_a_server():
    assert unit_of("tests/trainer/test_train_ray.py::test_a[x::y]") == \
        "tests/trainer/test_train_ray.py"
    assert unit_of("tests/engines/rollout/vllm/test_vllm_lora.py::test_b") == \
        "tests/engines/rollout/vllm"
    assert unit_of("tests/engines/rollout/vllmx/test_c.py::test_c") == \
        "tests/engines/rollout/vllmx/test_c.py"


def _item(nodeid: str, slow: bool) -> SimpleNamespace:
    def marker(name: str) -> object:
        return object() if name == "slow" and slow else None

    return SimpleNamespace(nodeid=nodeid, get_closest_marker=marker)


def test_units_with_more_slow_tests_go_first_each_whole_and_in_order():
    items = [_item("tests/a.py::t1", False), _item("tests/b.py::t1", True),
             _item("tests/a.py::t2", False), _item("tests/c.py::t1", True),
             _item("tests/c.py::t2", True), _item("tests/b.py::t2", False)]
    longest_units_first(items)
    assert [i.nodeid for i in items] == [
        "tests/c.py::t1", "tests/c.py::t2", "tests/b.py::t1", "tests/b.py::t2",
        "tests/a.py::t1", "tests/a.py::t2"]


def test_every_shared_server_package_is_a_folder_here():
    root = Path(__file__).resolve().parent.parent
    for package in SHARED_SERVER_PACKAGES:
        assert (root / package / "conftest.py").is_file(), package
