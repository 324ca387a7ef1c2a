import pytest
import torch

from prefbo.data.pairwise import PairwiseComparisons
from prefbo.exceptions import InputDataError, InputTypeError


@pytest.fixture
def X(tkwargs):
    return torch.linspace(0, 1, 12, **tkwargs).reshape(6, 2)


def test_pairwise_comparisons_hold_validated_answers(X):
    data = PairwiseComparisons(
        X, torch.tensor([[0.0, 1.0], [2.0, 3.0]], device=X.device)
    )
    assert data.comparisons.dtype == torch.long and data.indiscernible is None
    assert data.num_answers == 2 and data.num_designs == 6 and len(data.answers) == 1
    data = PairwiseComparisons(
        X,
        torch.tensor([[0, 1]], device=X.device),
        torch.tensor([[4, 5], [4, 5]], device=X.device),
    )
    assert data.num_answers == 3 and len(data.answers) == 2  # duplicates kept


def test_pairwise_comparisons_errors(X):
    dev = X.device
    with pytest.raises(
        InputDataError, match=r"comparisons must have shape batch_shape x m x 2"
    ):
        PairwiseComparisons(X, torch.tensor([[0, 1, 2]], device=dev))
    with pytest.raises(
        InputDataError,
        match=r"comparisons must be an m x 2 tensor \(answers are not batched",
    ):
        PairwiseComparisons(X, torch.tensor([[[0, 1]], [[1, 2]]], device=dev))
    with pytest.raises(
        InputDataError,
        match=r"indiscernible must be indices into datapoints in \[0, 5\]",
    ):
        PairwiseComparisons(
            X, torch.tensor([[0, 1]], device=dev), torch.tensor([[0, 6]], device=dev)
        )
    with pytest.raises(InputDataError, match="must compare two different designs"):
        PairwiseComparisons(X, torch.tensor([[2, 2]], device=dev))
    with pytest.raises(InputTypeError, match="datapoints must be a floating tensor"):
        PairwiseComparisons(torch.zeros(3, 2, dtype=torch.long), torch.tensor([[0, 1]]))


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("adjacent", [[2, 0], [0, 5], [1, 3], [2, 0], [0, 5]]),
        ("all", [[2, 0], [2, 5], [0, 5], [1, 3], [2, 0], [2, 5], [0, 5]]),
    ],
)
def test_rankings_of_designs_to_pairs(X, mode, expected):
    data = PairwiseComparisons.from_rankings(
        X, [[2, 0, 5], [1, 3], [2, 0, 5]], mode=mode
    )
    assert data.comparisons.tolist() == expected  # grouped by ranking, duplicates kept
