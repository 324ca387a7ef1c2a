"""``prefbo.data.validation``: designs, comparisons and bounds."""

from __future__ import annotations

import pytest
import torch

from prefbo import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.data import validation
from prefbo.exceptions import InputDataError, InputTypeError


def test_validate_datapoints():
    X = validation.validate_datapoints(torch.rand(4, dtype=torch.float64))
    assert X.shape == (4, 1)
    with pytest.raises(InputTypeError, match="datapoints must be a floating tensor"):
        validation.validate_datapoints(torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(InputDataError, match=r"datapoints must be finite; got nan"):
        validation.validate_datapoints(torch.tensor([[0.0], [float("nan")]]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_validate_datapoints_rejects_low_precision(dtype):
    X = torch.rand(4, 2).to(dtype)
    with pytest.raises(InputTypeError, match=f"float32 or float64.*{dtype}"):
        validation.validate_datapoints(X)
    comps = torch.tensor([[0, 1], [2, 3]])
    for cls in (PairwiseLaplaceGP, PairwiseEPGP):  # not torch's "not implemented"
        with pytest.raises(InputTypeError, match=f"datapoints.*{dtype}"):
            cls(X, comps)


def test_validate_comparisons():
    C = validation.validate_comparisons(torch.tensor([[0.0, 1.0]]), n=2)
    assert C.dtype == torch.long and C.tolist() == [[0, 1]]
    with pytest.raises(InputDataError, match=r"in \[0, 1\] \(n=2\); got min 0, max 2"):
        validation.validate_comparisons(torch.tensor([[0, 2]]), n=2)
    with pytest.raises(InputDataError, match="compares design 1 with itself"):
        validation.validate_comparisons(torch.tensor([[1, 1]]), n=2)
    with pytest.raises(InputTypeError, match="integer tensor of indices; got torch"):
        validation.validate_comparisons(torch.tensor([[True, False]]), n=2)


def test_validate_pairwise_data_broadcasts_batches():
    X, C = validation.validate_pairwise_data(
        torch.rand(3, 4, 2, dtype=torch.float64), torch.tensor([[0, 1]])
    )
    assert X.shape == (3, 4, 2) and C.shape == (3, 1, 2)
    with pytest.raises(InputDataError, match="broadcastable batch shapes"):
        validation.validate_pairwise_data(
            torch.rand(3, 4, 2, dtype=torch.float64), torch.tensor([[[0, 1]]] * 2)
        )


def test_check_bounds():
    validation.check_bounds(torch.tensor([[0.0, 0.0], [1.0, 2.0]]))
    with pytest.raises(InputDataError, match="bounds must have lower < upper"):
        validation.check_bounds(torch.tensor([[0.0], [0.0]]))
    with pytest.raises(
        InputDataError, match=r"bounds must be a 2 x d tensor .*got list"
    ):
        validation.check_bounds([[0.0], [1.0]])


@pytest.mark.parametrize(
    "bounds, match",
    [
        ([[0.0], [float("inf")]], r"bounds must be finite; got .*inf"),
        ([[float("nan")], [1.0]], r"bounds must be finite; got .*nan"),
        ([[-1e308], [1e308]], r"bounds must have a finite width .*x\[0\]"),
        # boxes with a handful of float64 values: two distinct options could
        # not be drawn (the loop asked a pair it then refused as identical)
        ([[0.0], [5e-324]], r"x\[0\] .* spans only 1 step of float64"),
        ([[0.0, 1e15], [1.0, 1e15 + 0.25]], r"x\[1\] .* spans only 2 steps of"),
    ],
)
def test_check_bounds_needs_a_finite_box(bounds, match):
    with pytest.raises(InputDataError, match=match):
        validation.check_bounds(torch.tensor(bounds, dtype=torch.float64))


def test_check_bounds_accepts_narrow_boxes_with_enough_resolution():
    # a millionth of the magnitude still holds ~4e9 float64 values
    validation.check_bounds(torch.tensor([[1e3], [1e3 + 1e-3]], dtype=torch.float64))
    validation.check_bounds(torch.tensor([[-1e-300], [1e-300]], dtype=torch.float64))
