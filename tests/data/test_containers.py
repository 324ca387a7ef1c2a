import pytest
import torch

from prefbo.data.containers import (
    ChoiceSets,
    LabelComparisons,
    PairwiseComparisons,
    Rankings,
    choices_to_pairs,
    orderings_to_pairs,
    validate_orderings,
)
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.likelihoods.choice import RationalChoiceLikelihood


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


def test_orderings_to_pairs_reports_the_source_rows():
    o = torch.tensor([[3, 1, -1], [0, 2, 1]])
    pairs, rows = orderings_to_pairs(o, "all")
    assert pairs.tolist() == [[3, 1], [0, 2], [0, 1], [2, 1]]
    assert rows.tolist() == [0, 1, 1, 1]
    with pytest.raises(InputDataError, match="mode must be one of"):
        orderings_to_pairs(o, "cyclic")


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
    with pytest.raises(InputDataError, match="num_labels must be an integer >= 2"):
        Rankings(X[:1], [[0]], num_labels=1)
    with pytest.raises(
        InputTypeError, match="orderings must hold integer indices; row 0"
    ):
        Rankings(X[:1], [[0, 1.5]])
    with pytest.raises(
        InputDataError, match="must list at least one item per row; row 0"
    ):
        validate_orderings([[]], 3)


def test_label_comparisons_errors(X):
    with pytest.raises(InputDataError, match=r"comparisons must have shape m x 3"):
        LabelComparisons(X, [[0, 1]], num_labels=3)
    with pytest.raises(
        InputDataError, match=r"contexts in \[0, 5\] and labels in \[0, 2\]"
    ):
        LabelComparisons(X, [[0, 1, 3]], num_labels=3)
    with pytest.raises(InputDataError, match="compare two different labels; row 0"):
        LabelComparisons(X, [[0, 1, 1]], num_labels=3)


def test_choice_sets_pad_and_mask_ragged_sets(X):
    data = ChoiceSets(X, [[0, 1, 2], [3, 4], [5, 0, 1, 2]], [[1], [3, 4], [2]])
    assert data.option_sets.tolist() == [[0, 1, 2, -1], [3, 4, -1, -1], [5, 0, 1, 2]]
    assert data.chosen.tolist() == [
        [False, True, False, False],
        [True, True, False, False],
        [False, False, False, True],
    ]
    assert data.mask.sum().item() == 9 and data.num_answers == 3


def test_choice_sets_move_padding_to_the_end(X):
    sets = torch.tensor([[-1, 2, 0], [1, -1, 3]], device=X.device)
    chosen = torch.tensor([[False, False, True], [False, False, True]], device=X.device)
    data = ChoiceSets(X, sets, chosen)
    assert data.option_sets.tolist() == [[2, 0], [1, 3]]
    assert data.chosen.tolist() == [[False, True], [False, True]]


def test_top1_choices_to_pairs(X):
    data = ChoiceSets(X, [[0, 1, 2], [3, 4], [5]], [[1], [4], [5]])
    pairs = data.to_pairs()
    assert pairs.comparisons.tolist() == [[1, 0], [1, 2], [4, 3]]
    _, rows = choices_to_pairs(data.option_sets, data.chosen)
    assert rows.tolist() == [0, 0, 1]
    with pytest.raises(
        UnsupportedError,
        match=r"only top-1 choices convert to pairs \(the chosen option beats each "
        r"other\); set 0 has 2 chosen",
    ):
        ChoiceSets(X, [[0, 1, 2]], [[0, 1]]).to_pairs()


def test_top1_choice_likelihood_equals_the_pairwise_probit_of_its_pairs(X):
    """One utility: a top-1 choice is the product of the probits of its pairs."""
    data = ChoiceSets(X, [[0, 1, 2], [3, 4], [5, 0]], [[1], [4], [0]])
    u = torch.randn(6, dtype=X.dtype, device=X.device)
    choice = RationalChoiceLikelihood().choice_log_prob(u.unsqueeze(-1), *data.answers)
    pairwise = PairwiseProbitLikelihood().log_prob_answers(
        u, data.to_pairs().comparisons
    )
    rows = torch.tensor([0, 0, 1, 2], device=X.device)
    torch.testing.assert_close(
        choice, torch.zeros_like(choice).index_add(0, rows, pairwise)
    )


def test_choice_sets_chosen_entries_are_checked(X):
    with pytest.raises(InputTypeError, match=r"chosen\[0\] must be a sequence of"):
        ChoiceSets(X, [[0, 1], [1, 2]], [0, 2])  # flat, not one list per set
    with pytest.raises(InputDataError, match=r"chosen\[0\] lists a design more"):
        ChoiceSets(X, [[0, 1, 3]], [[3, 3]])
    with pytest.raises(InputTypeError, match=r"chosen\[0\] must hold int design"):
        ChoiceSets(X, [[0, 1]], [[True]])


def test_rankings_with_no_pair_to_give_say_so(X):
    with pytest.raises(InputDataError, match=r"at least one ordering of two or more"):
        Rankings(X[:2], [[0], [1]], num_labels=3).to_pairs()


def test_choice_sets_errors(X):
    with pytest.raises(
        InputDataError,
        match=r"chosen must be subsets of their option sets; set 0 is \[0, 1\] but "
        "chosen lists 2",
    ):
        ChoiceSets(X, [[0, 1]], [[2]])
    with pytest.raises(
        InputDataError, match="chosen must mark at least one option of every set; set 1"
    ):
        ChoiceSets(X, [[0, 1], [2, 3]], [[0], []])
    with pytest.raises(
        InputDataError, match="must not repeat a design within a row; row 0"
    ):
        ChoiceSets(X, [[0, 1, 0]], [[0]])
    with pytest.raises(
        InputDataError, match="must hold at least one option per set; set 0 is empty"
    ):
        ChoiceSets(
            X,
            torch.tensor([[-1, -1]], device=X.device),
            torch.tensor([[False, False]], device=X.device),
        )
    with pytest.raises(InputDataError, match="chosen must be False on padding"):
        ChoiceSets(
            X,
            torch.tensor([[0, -1]], device=X.device),
            torch.tensor([[False, True]], device=X.device),
        )
    with pytest.raises(InputTypeError, match="chosen must be a k x s bool tensor"):
        ChoiceSets(
            X,
            torch.tensor([[0, 1]], device=X.device),
            torch.tensor([[1, 0]], device=X.device),
        )
    with pytest.raises(
        InputTypeError,
        match=r"sequence of k sequences of design indices \(k=1\); got list of "
        "length 2",
    ):
        ChoiceSets(X, [[0, 1]], [[0], [1]])
    with pytest.raises(
        InputTypeError, match="option_sets must be a k x s tensor or a sequence"
    ):
        ChoiceSets(X, "0,1", [[0]])
