import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.models.collaborative.checks import check_answers, check_person_features


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
