"""A block registered before its bytes exist: keys and tags at once, data on commit."""

from __future__ import annotations

import pytest

from rlctl.dataplane.contract import DataPlaneError
from rlctl.dataplane.key_index import Failed, KeyIndex, Reserved


def _reserve(index: KeyIndex, token: str, keys: list[str], tags=None) -> int:
    return index.put("p", keys, tags, Reserved(token, 0.0), ["x", "y"])


def test_reserved_keys_and_tags_are_visible_and_a_locate_names_the_reserved_block():
    index = KeyIndex()
    version = _reserve(index, "t1", ["a", "b"], [{"status": "success"}, {}])
    assert version == 1  # a tag change, as for any put
    assert index.list("p") == {"a": {"status": "success"}, "b": {}}
    located = index.locate("p", ["b", "a"], ["x"])
    assert located.locs == {"x": [(0, 1), (0, 0)]}
    assert KeyIndex.reserved_in(located) == [Reserved("t1", 0.0)]
    assert index.block_count() == 1


def test_commit_hands_over_the_handle_once():
    index = KeyIndex()
    _reserve(index, "t1", ["a", "b"])
    assert index.commit("t1", "ref") is True
    located = index.locate("p", ["a", "b"], ["x", "y"])
    assert located.handles == {0: "ref"} and KeyIndex.reserved_in(located) == []
    assert index.commit("t1", "again") is False  # the token is spent
    assert index.locate("p", ["a"], ["x"]).handles == {0: "ref"}


@pytest.mark.parametrize("how", ["clear", "overwrite"])
def test_a_reservation_nothing_references_any_more_drops_its_late_commit(how):
    index = KeyIndex()
    _reserve(index, "t1", ["a"])
    if how == "clear":
        index.clear("p", ["a"])
    else:
        index.put("p", ["a"], None, "new", ["x", "y"])
    assert index.commit("t1", "late") is False
    assert index.block_count() == (0 if how == "clear" else 1)
    if how == "overwrite":
        assert index.locate("p", ["a"], ["x", "y"]).handles == {1: "new"}


def test_a_partial_overwrite_keeps_the_reservation_of_the_other_field():
    index = KeyIndex()
    _reserve(index, "t1", ["a"])
    index.put("p", ["a"], None, "new", ["x"])
    assert KeyIndex.reserved_in(index.locate("p", ["a"], ["x"])) == []
    assert KeyIndex.reserved_in(index.locate("p", ["a"], ["y"])) == [Reserved("t1", 0.0)]
    assert index.commit("t1", "ref") is True
    assert index.locate("p", ["a"], ["y"]).handles == {0: "ref"}


def test_a_failed_put_is_an_error_for_its_readers_not_a_wait():
    index = KeyIndex()
    _reserve(index, "t1", ["a", "b"])
    index.commit("t1", Failed("ObjectStoreFullError: no room"))
    with pytest.raises(DataPlaneError, match=r"never stored.*ObjectStoreFullError: no room"):
        index.locate("p", ["a"], ["y"])
    index.clear("p", ["a", "b"])  # and the keys can be cleared (and written again)
    assert index.block_count() == 0
