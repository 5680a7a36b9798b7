"""KVBatchMeta and the key scheme (pure metadata; no torch)."""

import pickle
import subprocess
import sys

import pytest

from rlctl.protocol.kv import KeyFormatError, KVBatchMeta, make_key, new_uid, parse_key


def meta(n: int, **tag_fn) -> KVBatchMeta:
    keys = [make_key(f"u{i // 2}", i % 2, 0) for i in range(n)]
    tags = [{name: fn(i) for name, fn in tag_fn.items()} for i in range(n)]
    return KVBatchMeta(tuple(keys), "train", tuple(tags))


def test_key_round_trip_and_rejections():
    uid = new_uid()
    assert "_" not in uid
    assert parse_key(make_key(uid, 3, 1)) == (uid, 3, 1)
    with pytest.raises(KeyFormatError, match="without '_'"):
        make_key("a_b", 0, 0)
    with pytest.raises(KeyFormatError, match="non-negative"):
        make_key("ab", -1, 0)
    for bad in ["ab", "a_b", "a_1_x", "_1_2", "a_1_2_3"]:
        with pytest.raises(KeyFormatError):
            parse_key(bad)


def test_validation():
    with pytest.raises(ValueError, match="duplicate"):
        KVBatchMeta(("a_0_0", "a_0_0"), "train")
    with pytest.raises(ValueError, match="2 keys but 1 tag"):
        KVBatchMeta(("a_0_0", "a_1_0"), "train", ({},))
    m = KVBatchMeta(["a_0_0"], "train")  # lists are normalised, tags default to {}
    assert m.keys == ("a_0_0",) and m.tags == ({},)


def test_tags_are_copied_and_meta_is_picklable():
    tag = {"seq_len": 3}
    m = KVBatchMeta(("a_0_0",), "train", (tag,))
    tag["seq_len"] = 99
    assert m.tags[0]["seq_len"] == 3
    assert pickle.loads(pickle.dumps(m)) == m


def test_select():
    m = meta(6, seq_len=lambda i: i)
    assert m.select([3, 4, 5]).keys == m.keys[3:]
    assert m.select(lambda k, t: t["seq_len"] % 2 == 0).tag_values("seq_len") == [0, 2, 4]
    assert m.select([5, 4, 3, 2, 1, 0]).tag_values("seq_len") == [5, 4, 3, 2, 1, 0]
    with pytest.raises(ValueError, match="duplicate"):
        m.select([0, 0])
    with pytest.raises(ValueError, match="duplicate"):
        m.select([-1, 5])  # the same key twice, however it is named
    with pytest.raises(IndexError):
        m.select([6])
    with pytest.raises(KeyError, match="missing"):
        meta(2).tag_values("seq_len")


def test_splits_share_the_batch_own_tag_copies():
    """select / chunk / concat hand on the batch's tag dicts (copied once, at construction)
    instead of copying each again; pickling still gives independent copies."""
    m = meta(4, seq_len=lambda i: i)
    part = m.select([2, 0])
    assert part.tags[0] is m.tags[2] and part.partition_id == "train"
    joined = KVBatchMeta.concat(m.chunk(2))
    assert joined == m and all(a is b for a, b in zip(joined.tags, m.tags, strict=True))
    with pytest.raises(ValueError, match="duplicate"):
        KVBatchMeta.concat([m, m.select([1])])
    assert pickle.loads(pickle.dumps(part)) == part


def test_shared_holds_the_dicts_handed_over_and_checks_like_any_batch():
    tags = ({"seq_len": 1}, {"seq_len": 2})
    m = KVBatchMeta.shared(["a_0_0", "a_1_0"], "train", tags)
    assert m.tags[0] is tags[0] and m == KVBatchMeta(("a_0_0", "a_1_0"), "train", tags)
    assert type(m.keys) is tuple and type(m.tags) is tuple  # lists handed in are frozen
    assert m.select([1]).tags[0] is tags[1]  # and what it splits off shares them too
    copy = pickle.loads(pickle.dumps(m))
    assert copy == m and copy.tags[0] is not tags[0]
    with pytest.raises(ValueError, match="duplicate"):
        KVBatchMeta.shared(["a_0_0", "a_0_0"], "train", tags)
    with pytest.raises(ValueError, match="2 keys but 1 tag"):
        KVBatchMeta.shared(["a_0_0", "a_1_0"], "train", tags[:1])
    with pytest.raises(ValueError, match="partition_id"):
        KVBatchMeta.shared(["a_0_0"], "", tags[:1])


def test_chunk_by_count_is_contiguous_and_even():
    m = meta(7)
    chunks = m.chunk(3)
    assert [len(c) for c in chunks] == [3, 2, 2]
    assert tuple(k for c in chunks for k in c.keys) == m.keys
    assert [len(c) for c in meta(2).chunk(4)] == [1, 1, 0, 0]
    with pytest.raises(ValueError):
        m.chunk(0)


def test_protocol_does_not_import_torch():
    code = (
        "import sys, rlctl.protocol.kv, rlctl.dataplane; "
        "print('torch' in sys.modules or 'ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
