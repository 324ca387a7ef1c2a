import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.models.collaborative.checks import (
    check_answers,
    check_item_effects,
    check_person_features,
    check_person_ids,
    pool_item_effects,
)


def test_answers():
    rows, P = check_answers(
        torch.tensor([[0, 1, 2], [2, 0, 1]], dtype=torch.int32), 3, None
    )
    assert rows.dtype == torch.long and P == 3
    with pytest.raises(
        InputDataError,
        match=r"m x 3 tensor of \(person, winner, loser\) rows; got shape \(2,\)",
    ):
        check_answers(torch.tensor([0, 1]), 3, None)
    with pytest.raises(InputTypeError, match="got a bool tensor|got"):
        check_answers(torch.ones(1, 3, dtype=torch.bool), 3, None)
    with pytest.raises(
        InputDataError, match="person ids must be below num_people=2; got 2"
    ):
        check_answers(torch.tensor([[2, 0, 1]]), 3, 2)
    with pytest.raises(InputDataError, match="person ids must be >= 0; got -1"):
        check_answers(torch.tensor([[-1, 0, 1]]), 3, 2)
    with pytest.raises(
        InputDataError, match="num_people must be given when answers is empty"
    ):
        check_answers(torch.zeros(0, 3, dtype=torch.long), 3, None)
    assert check_answers(torch.zeros(0, 3, dtype=torch.long), 3, 4)[1] == 4
    assert check_answers(torch.zeros(0, 3, dtype=torch.long), 3, 0)[1] == 0
    with pytest.raises(InputDataError, match="person ids must be below num_people=0"):
        check_answers(torch.tensor([[0, 0, 1]]), 3, 0)


def test_person_features():
    like = torch.zeros(1, dtype=torch.float64)
    assert check_person_features(None, 3, like) is None
    assert check_person_features(torch.ones(3, 2), 3, like).dtype == torch.float64
    with pytest.raises(
        InputTypeError, match="person_features must be a P x e floating tensor"
    ):
        check_person_features(torch.ones(3, 2, dtype=torch.long), 3, like)
    with pytest.raises(InputDataError, match="must be finite"):
        check_person_features(torch.tensor([[float("nan")]] * 3), 3, like)


def test_designs_outside_the_unit_cube_warn_as_botorch_s_models_do():
    r"""The kernel's priors assume the unit cube: designs in other units
    warn (BoTorch's InputDataWarning, naming the range) at the constructor
    and where an answer brings new designs; unit-cube ones do not."""
    from botorch.exceptions import InputDataWarning

    from prefbo.models.collaborative import CollaborativePreferenceGP

    g = torch.Generator().manual_seed(0)
    X = torch.rand(6, 2, generator=g, dtype=torch.float64)
    answers = torch.tensor([[0, 0, 1], [1, 2, 3], [1, 4, 5]])
    with pytest.raises(
        InputDataWarning, match=r"values from 1.77 to 9.7.*map them into \[0, 1\]\^d"
    ):
        CollaborativePreferenceGP(10 * X, answers, num_inducing=4, num_residual=2)
    model = CollaborativePreferenceGP(X, answers, num_inducing=4, num_residual=2)
    model.observe(0, X[:1], X[1:2])  # known designs, no warning
    with pytest.raises(InputDataWarning, match=r"values from -1 to 0\.5"):
        model.observe(0, torch.tensor([[0.5, 0.5]]).double(), -X[:1].clamp_min(1.0))


def test_person_ids():
    ids = check_person_ids(torch.tensor([2, 0], dtype=torch.int32), 3)
    assert ids.dtype == torch.long and ids.tolist() == [2, 0]
    assert check_person_ids(torch.zeros(0, dtype=torch.long), 0).shape == (0,)
    assert check_person_ids(torch.tensor([1], dtype=torch.uint8), 3).tolist() == [1]
    for bad in (
        [0],
        torch.tensor([0.0]),
        torch.tensor([True]),
        torch.tensor([[0]]),
        torch.tensor([0], dtype=torch.uint32),
    ):
        with pytest.raises(InputTypeError, match="people must be a 1-d integer"):
            check_person_ids(bad, 3)
    with pytest.raises(
        InputDataError, match=r"in \[0, 3\); got values from -1 to 2 \(add a newcomer"
    ):
        check_person_ids(torch.tensor([2, -1]), 3)


def test_pool_item_effects_needs_revisited_designs_beyond_the_inducing_points():
    assert pool_item_effects(num_designs=100, num_answers=100, num_inducing=64)
    assert not pool_item_effects(num_designs=100, num_answers=99, num_inducing=64)
    assert not pool_item_effects(num_designs=64, num_answers=1000, num_inducing=64)
    assert check_item_effects(None) is None and check_item_effects(True) is True
    with pytest.raises(
        InputTypeError, match="item_effects must be True, False or None"
    ):
        check_item_effects(1)
