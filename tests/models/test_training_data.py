import pytest
import torch

from prefbo.exceptions import InputDataError
from prefbo.models import PairwiseLaplaceGP
from prefbo.models.training_data import (
    check_mask,
    check_same_layout,
    padded_train_covariance,
)


def test_masks_that_contradict_each_other_are_named():
    X = torch.rand(2, 4, 2, dtype=torch.float64)
    C = torch.tensor([[[0, 1], [1, 2]], [[0, 3], [1, 0]]])
    design_mask = torch.tensor([[True] * 4, [True, True, False, False]])
    with pytest.raises(InputDataError, match=r"refer to designs that design_mask"):
        PairwiseLaplaceGP(
            X, C, design_mask=design_mask, comparison_mask=torch.ones(2, 2).bool()
        )
    empty = torch.tensor([[True] * 4, [False] * 4])
    with pytest.raises(InputDataError, match=r"batch element\(s\) \[\[1\]\]"):
        PairwiseLaplaceGP(
            X,
            C,
            design_mask=empty,
            comparison_mask=torch.tensor([[1, 1], [0, 0]]).bool(),
        )


def test_mask_checks_name_the_mask():
    data = torch.zeros(3, 2)
    with pytest.raises(InputDataError, match="design_mask must be a bool tensor"):
        check_mask(data, torch.ones(3), "design_mask", torch.Size([3]))
    with pytest.raises(InputDataError, match=r"must have shape \(3,\)"):
        check_mask(data, torch.ones(4).bool(), "design_mask", torch.Size([3]))
    with pytest.raises(InputDataError, match="cannot change the shape of datapoints"):
        check_same_layout(data, torch.zeros(1, 2), torch.zeros(4, 2), torch.zeros(1, 2))


def test_padded_train_covariance():
    K = torch.tensor([[2.0, 0.5, 0.3], [0.5, 4.0, 0.1], [0.3, 0.1, 9.0]])
    K = K.double()
    mask = torch.tensor([True, True, False])
    out = padded_train_covariance(K, mask, 0.1)
    expected = torch.tensor([[2.0, 0.5, 0.0], [0.5, 4.0, 0.0], [0.0, 0.0, 1.0]])
    expected = expected.double() + 0.1 * 3.0 * torch.eye(3, dtype=torch.float64)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(
        padded_train_covariance(K, None, 0.0), K
    )  # no nugget: K itself
