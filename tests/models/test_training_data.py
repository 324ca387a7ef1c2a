import pytest
import torch
from botorch.models import PairwiseGP

from prefbo.exceptions import InputDataError
from prefbo.models import PairwiseLaplaceGP
from prefbo.models.training_data import (
    check_mask,
    check_same_layout,
    padded_train_covariance,
)
from prefbo.utils.testing import make_pairwise_data


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


def test_duplicate_designs_are_merged_and_comparisons_all_count():
    X = torch.tensor(
        [[0.1, 0.2], [0.5, 0.5], [0.1, 0.2], [0.9, 0.1]], dtype=torch.float64
    )
    comp = torch.tensor([[0, 1], [1, 2], [3, 2], [3, 2]])
    model = PairwiseLaplaceGP(X, comp)
    assert model.n == 3 and model.m == 4
    merged = PairwiseLaplaceGP(
        X[[0, 1, 3]], torch.tensor([[0, 1], [1, 0], [2, 0], [2, 0]])
    )
    torch.testing.assert_close(model.utility, merged.utility)


def test_learned_input_transform_bounds_match_botorch_before_any_fit():
    # Normalize without bounds learns them from the training designs when the
    # data are set, as BoTorch's PairwiseGP does (prefbo kept the identity
    # until a training-mode forward, so an unfitted model predicted on the
    # raw scale), and again when set_train_data brings new designs
    from botorch.models.transforms.input import Normalize

    X, comp = make_pairwise_data(20, 30, seed=6)[:2]
    X = X * 10 + 5
    bt = PairwiseGP(X, comp, input_transform=Normalize(d=2))
    pb = PairwiseLaplaceGP(X, comp, input_transform=Normalize(d=2))
    torch.testing.assert_close(pb.input_transform.bounds, bt.input_transform.bounds)
    Xt = torch.rand(3, 2, dtype=torch.float64) * 10 + 5
    post_b, post_p = bt.posterior(Xt), pb.posterior(Xt)
    torch.testing.assert_close(post_p.mean, post_b.mean, rtol=0, atol=1e-6)
    torch.testing.assert_close(
        post_p.covariance_matrix, post_b.covariance_matrix, rtol=0, atol=1e-6
    )
    pb.set_train_data(X * 2, comp)
    lo, hi = (X * 2).min(0).values, (X * 2).max(0).values
    torch.testing.assert_close(pb.input_transform.bounds, torch.stack([lo, hi]))
