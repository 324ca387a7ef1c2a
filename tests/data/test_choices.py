import pytest
import torch

from prefbo.data.choices import ChoiceSets
from prefbo.data.conversions import choices_to_pairs
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.likelihoods.choice import RationalChoiceLikelihood


@pytest.fixture
def X(tkwargs):
    return torch.linspace(0, 1, 12, **tkwargs).reshape(6, 2)


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
