"""KVBatchMeta and the key scheme (pure metadata; no torch)."""

import pickle
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


def test_concat_select_reorder():
    m = meta(6, seq_len=lambda i: i)
    a, b = m.select(range(3)), m.select([3, 4, 5])
    assert KVBatchMeta.concat([a, b]) == m
    with pytest.raises(ValueError, match="several partitions"):
        KVBatchMeta.concat([a, KVBatchMeta(("z_0_0",), "val")])
    with pytest.raises(ValueError, match="duplicate"):
        KVBatchMeta.concat([a, a])
    assert m.select(lambda k, t: t["seq_len"] % 2 == 0).tag_values("seq_len") == [0, 2, 4]
    assert m.reorder([5, 4, 3, 2, 1, 0]).tag_values("seq_len") == [5, 4, 3, 2, 1, 0]
    with pytest.raises(ValueError, match="permutation"):
        m.reorder([0, 0, 1, 2, 3, 4])
    with pytest.raises(IndexError):
        m.select([6])


def test_chunk_by_count_is_contiguous_and_even():
    m = meta(7)
    chunks = m.chunk(3)
    assert [len(c) for c in chunks] == [3, 2, 2]
    assert KVBatchMeta.concat(chunks) == m
    assert [len(c) for c in meta(2).chunk(4)] == [1, 1, 0, 0]
    with pytest.raises(ValueError):
        m.chunk(0)


def test_chunk_balanced_by_seq_len():
    lens = [100, 90, 1, 1, 1, 1, 80, 70]
    m = meta(8, seq_len=lambda i: lens[i])
    assert sorted(sum(c.tag_values("seq_len")) for c in m.chunk(2)) == [152, 192]
    chunks = m.chunk(2, balance_by="seq_len")
    assert [len(c) for c in chunks] == [4, 4]
    assert sorted(sum(c.tag_values("seq_len")) for c in chunks) == [172, 172]
    for c in chunks:  # order-stable inside a chunk
        positions = [m.keys.index(k) for k in c.keys]
        assert positions == sorted(positions)
    with pytest.raises(KeyError, match="missing"):
        meta(2).chunk(2, balance_by="seq_len")


@given(st.lists(st.integers(1, 1000), min_size=1, max_size=40), st.integers(1, 6))
def test_balanced_chunk_properties(lens, n):
    m = meta(len(lens), seq_len=lambda i: lens[i])
    chunks = m.chunk(n, balance_by="seq_len")
    assert sorted(k for c in chunks for k in c.keys) == sorted(m.keys)
    sizes = [len(c) for c in chunks]
    assert max(sizes) - min(sizes) <= 1
    # greedy longest-first is within one item of the best possible max load
    loads = [sum(c.tag_values("seq_len")) for c in chunks]
    assert max(loads) <= sum(lens) / n + max(lens)


@given(st.lists(st.integers(1, 5), min_size=1, max_size=12), st.integers(1, 4))
def test_chunk_by_group_keeps_groups_together(group_sizes, n):
    keys, tags = [], []
    for g, size in enumerate(group_sizes):
        for s in range(size):
            keys.append(make_key(f"g{g}", s, 0))
            tags.append({} if g % 2 else {"uid": f"g{g}"})  # tag or parsed from the key
    m = KVBatchMeta(tuple(keys), "train", tuple(tags))
    chunks = m.chunk_by_group(n)
    assert len(chunks) == n
    owner = {}
    for c_idx, c in enumerate(chunks):
        for k in c.keys:
            assert owner.setdefault(parse_key(k)[0], c_idx) == c_idx
    assert sorted(k for c in chunks for k in c.keys) == sorted(keys)
    counts = sorted(len(c) for c in chunks)
    assert counts[-1] - counts[0] <= max(group_sizes)


def test_protocol_does_not_import_torch():
    code = (
        "import sys, rlctl.protocol.kv, rlctl.dataplane; "
        "print('torch' in sys.modules or 'ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
