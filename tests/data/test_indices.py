import pytest
import torch

from prefbo.data.indices import (
    as_index_tensor,
    check_no_duplicates,
    compact_padding,
    remap_indices,
    touched_indices,
)
from prefbo.exceptions import InputDataError, InputTypeError

CPU = torch.device("cpu")


def _index(x, upper=5, padding=True):
    return as_index_tensor(
        x, "rows", upper, device=CPU, padding=padding, shape_text="k x s"
    )


def test_ragged_sequences_are_padded_at_the_end_of_a_row():
    out = _index([[3, 1], [4], [0, 2, 1]])
    assert out.dtype == torch.long
    assert out.tolist() == [[3, 1, -1], [4, -1, -1], [0, 2, 1]]
    assert _index([torch.tensor([1, 2])]).tolist() == [[1, 2]]


def test_integer_valued_float_tensors_are_accepted():
    out = _index(torch.tensor([[1.0, -1.0]]))
    assert out.dtype == torch.long and out.tolist() == [[1, -1]]


def test_index_tensor_errors():
    with pytest.raises(InputTypeError, match="rows must be an integer tensor"):
        _index(torch.tensor([[True, False]]))
    with pytest.raises(InputDataError, match="rows must hold integer indices; got"):
        _index(torch.tensor([[0.5, 1.0]]))
    with pytest.raises(InputTypeError, match="rows must hold integer indices; row 1"):
        _index([[0], [True]])
    with pytest.raises(InputTypeError, match="sequence of sequences of indices; row 0"):
        _index([3])
    with pytest.raises(InputTypeError, match="got int"):
        _index(3)
    with pytest.raises(InputDataError, match=r"rows must have shape k x s; got \(2,\)"):
        _index(torch.tensor([0, 1]))
    with pytest.raises(InputDataError, match="rows must hold at least one row"):
        _index([])
    with pytest.raises(
        InputDataError, match=r"rows must hold indices in \[0, 4\]; got min -1, max 1"
    ):
        _index([[1, -1]], padding=False)
    with pytest.raises(
        InputDataError,
        match=r"rows must hold indices in \[0, 4\] or -1 for padding; got min 0, "
        "max 5",
    ):
        _index([[0, 5]])


def test_duplicates_are_found_but_padding_may_repeat():
    check_no_duplicates(torch.tensor([[0, -1, -1], [2, 1, -1]]), "rows", "a design")
    with pytest.raises(
        InputDataError, match=r"rows must not repeat a design within a row; row 1 is "
    ):
        check_no_duplicates(torch.tensor([[0, 1], [2, 2]]), "rows", "a design")


def test_compact_padding_is_stable_and_drops_empty_columns():
    x = torch.tensor([[-1, 2, -1, 0], [1, -1, 3, -1]])
    flags = torch.tensor([[False, True, False, False], [False, False, True, False]])
    out, out_flags = compact_padding(x, flags)
    assert out.tolist() == [[2, 0], [1, 3]]
    assert out_flags.tolist() == [[True, False], [False, True]]


def test_touched_indices_and_remap_round_trip():
    rows = torch.tensor([[7, 2, -1], [4, 7, 9]])
    design_index = touched_indices(rows, torch.tensor([2, -1]))
    assert design_index.tolist() == [2, 4, 7, 9]
    (local,) = remap_indices(design_index, 10, rows)
    assert local.tolist() == [[2, 0, -1], [1, 2, 3]]
    assert torch.where(local >= 0, design_index[local], local).tolist() == (
        rows.tolist()
    )
