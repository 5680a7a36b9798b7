"""Property test of the gather path: rows written by many puts, read in any order and layout."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.dataplane import jagged, open_data_plane

row_lengths = st.lists(st.integers(0, 6), min_size=1, max_size=5)


@settings(max_examples=40, deadline=None)
@given(
    puts=st.lists(row_lengths, min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
    pad=st.sampled_from([0, -1]),
    dtype=st.sampled_from([torch.int64, torch.float32, torch.bfloat16]),
)
def test_any_order_any_layout_matches_reference(puts, seed, pad, dtype):
    plane = open_data_plane("memory", {}, run_id="prop")
    g = torch.Generator().manual_seed(seed)
    reference: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for p, lengths in enumerate(puts):
        keys = [f"p{p}r{i}_0_0" for i in range(len(lengths))]
        rows = [torch.randint(1, 50, (n,), generator=g).to(dtype) for n in lengths]
        pairs = [torch.randint(1, 50, (n, 2), generator=g).to(dtype) for n in lengths]  # [L_i, 2]
        dense = torch.randn(len(lengths), 3, generator=g).to(dtype)
        plane.kv_batch_put(keys, "train", {"r": rows, "d": dense, "p": pairs})
        reference.update({k: (r, d, q) for k, r, d, q in zip(keys, rows, dense, pairs,
                                                            strict=True)})
    order = list(reference)
    perm = torch.randperm(len(order), generator=g).tolist()
    keys = [order[i] for i in perm]

    keys = keys[: max(1, len(keys) - seed % 3)]  # some of the keys, not always all
    td = plane.kv_batch_get(keys, "train", ["r", "d", "p"])
    assert [r.tolist() for r in td.get("r").unbind()] == [reference[k][0].tolist() for k in keys]
    assert [p.tolist() for p in td.get("p").unbind()] == [reference[k][2].tolist() for k in keys]
    assert torch.equal(td.get("d"), torch.stack([reference[k][1] for k in keys]))
    assert td.get("r").dtype == dtype and td.get("d").dtype == dtype

    padded = plane.kv_batch_get(keys, "train", ["r"], layout="padded", pad_value=pad).get("r")
    want, _mask = jagged.to_padded(jagged.from_list([reference[k][0] for k in keys]), pad)
    assert padded.dtype == dtype and torch.equal(padded, want)
    plane.close()
