import pytest
import torch

from prefbo.data.labels import LabelComparisons, Rankings
from prefbo.exceptions import InputDataError, InputTypeError


@pytest.fixture
def X(tkwargs):
    return torch.linspace(0, 1, 12, **tkwargs).reshape(6, 2)


def test_rankings_store_padded_orderings_and_convert_to_label_pairs(X):
    r = Rankings(X[:3], [[2, 0, 1, 3], [1], [3, 0]])
    assert r.num_labels == 4
    assert r.orderings.tolist() == [[2, 0, 1, 3], [1, -1, -1, -1], [3, 0, -1, -1]]
    assert r.lengths.tolist() == [4, 1, 2]
    pairs = r.to_pairs("adjacent")
    assert isinstance(pairs, LabelComparisons)
    assert pairs.comparisons.tolist() == [[0, 2, 0], [0, 0, 1], [0, 1, 3], [2, 3, 0]]
    assert r.to_pairs("all").num_answers == 6 + 0 + 1
    assert Rankings(X[:1], torch.tensor([[1, 0]]), num_labels=5).num_labels == 5


def test_rankings_errors(X):
    with pytest.raises(
        InputDataError, match=r"orderings must have one row per context \(N=2\); got 1"
    ):
        Rankings(X[:2], [[0, 1]])
    with pytest.raises(
        InputDataError, match="padded with -1 at the end of a row only; row 0"
    ):
        Rankings(X[:1], torch.tensor([[0, -1, 1]]))
    with pytest.raises(
        InputDataError, match="must not repeat an item within a row; row 1"
    ):
        Rankings(X[:2], [[0, 1], [2, 2]])
    with pytest.raises(
        InputDataError, match=r"orderings must hold indices in \[0, 2\] or -1"
    ):
        Rankings(X[:1], [[0, 3]], num_labels=3)
    with pytest.raises(
        InputDataError, match="num_labels must be an int >= 2; got num_labels=1"
    ):
        Rankings(X[:1], [[0]], num_labels=1)
    with pytest.raises(
        InputTypeError, match="num_labels must be an int >= 2; got float 3.0"
    ):
        Rankings(X[:1], [[0]], num_labels=3.0)
    with pytest.raises(
        InputTypeError, match="orderings must hold integer indices; row 0"
    ):
        Rankings(X[:1], [[0, 1.5]])


def test_label_comparisons_errors(X):
    with pytest.raises(InputDataError, match=r"comparisons must have shape m x 3"):
        LabelComparisons(X, [[0, 1]], num_labels=3)
    with pytest.raises(
        InputDataError, match=r"contexts in \[0, 5\] and labels in \[0, 2\]"
    ):
        LabelComparisons(X, [[0, 1, 3]], num_labels=3)
    with pytest.raises(InputDataError, match="compare two different labels; row 0"):
        LabelComparisons(X, [[0, 1, 1]], num_labels=3)


def test_rankings_with_no_pair_to_give_say_so(X):
    with pytest.raises(InputDataError, match=r"at least one ordering of two or more"):
        Rankings(X[:2], [[0], [1]], num_labels=3).to_pairs()
