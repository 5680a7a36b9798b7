"""Jagged helpers: pack/unpack, padding and back."""

import pytest
import torch

from rlctl.dataplane import jagged


def test_pad_and_back():
    rows = [torch.tensor([1, 2, 3]), torch.tensor([4]), torch.tensor([5, 6])]
    nt = jagged.from_list(rows)
    assert jagged.lengths(nt).tolist() == [3, 1, 2]
    padded, mask = jagged.to_padded(nt, pad_value=-1)
    assert padded.tolist() == [[1, 2, 3], [4, -1, -1], [5, 6, -1]]
    assert mask.tolist() == [[True, True, True], [True, False, False], [True, True, False]]
    for back in (
        jagged.from_padded(padded, mask),
        jagged.from_padded(padded, torch.tensor([3, 1, 2])),
    ):
        assert [r.tolist() for r in back.unbind()] == [r.tolist() for r in rows]


def test_trailing_dims_and_views():
    rows = [torch.randn(2, 4), torch.randn(5, 4)]
    nt = jagged.from_list(rows)
    padded, _mask = jagged.to_padded(nt)
    assert padded.shape == (2, 5, 4) and torch.equal(padded[1], rows[1])
    assert torch.equal(padded[0, 2:], torch.zeros(3, 4))
    # a nested tensor whose offsets do not start at 0 (a slice of a bigger buffer)
    values = torch.arange(10)
    view = torch.nested.nested_tensor_from_jagged(values, torch.tensor([2, 4, 7]))
    assert jagged.to_padded(view)[0].tolist() == [[2, 3, 0], [4, 5, 6]]


def test_pack_rejects_mixed_rows():
    import pytest

    with pytest.raises(ValueError, match="trailing shape"):
        jagged.pack([torch.zeros(2, 3), torch.zeros(2, 4)])
    with pytest.raises(ValueError):
        jagged.pack([torch.tensor(1.0)])


_FIRST_NT_OP = (
    "import torch\n"
    "torch.nested.nested_tensor_from_jagged(torch.arange(6), torch.tensor([0, 2, 6]))\n"
)


@pytest.mark.parametrize("with_rlctl", [False, True], ids=["torch-alone", "rlctl"])
def test_torchs_fx_tracing_notice_is_dropped_once_rlctl_is_imported(with_rlctl):
    """torch logs the notice on a process's first nested-tensor op; rlctl drops that one record
    (the torch-alone case shows it is still there to drop: if torch stops logging it, the
    filter in rlctl/dataplane/jagged.py can go)."""
    import subprocess
    import sys

    code = ("import rlctl.dataplane.jagged\n" if with_rlctl else "") + _FIRST_NT_OP
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert ("is_fx_tracing will return true" in out.stderr) is not with_rlctl, out.stderr
