import pytest
import torch
from gpytorch.distributions import MultitaskMultivariateNormal

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.likelihoods.base import check_index_tensor
from prefbo.likelihoods.jnd import JustNoticeableDifferenceLikelihood
from prefbo.likelihoods.labels import PlackettLuceLikelihood, ThurstoneRankingLikelihood


def test_check_index_tensor_messages():
    with pytest.raises(
        InputTypeError, match=r"pairs must be a torch.Tensor of shape k x 2; got list"
    ):
        check_index_tensor([[0, 1]], "pairs", 3)
    with pytest.raises(
        InputTypeError,
        match="pairs must be an integer \\(long\\) tensor of indices; got torch.bool",
    ):
        check_index_tensor(torch.tensor([[True, False]]), "pairs", 3)
    with pytest.raises(
        InputDataError, match=r"pairs must have shape k x 2; got \(2, 3\)"
    ):
        check_index_tensor(torch.zeros(2, 3, dtype=torch.long), "pairs", 3, width=2)
    with pytest.raises(
        InputDataError,
        match=r"sets must hold indices in \[0, 2\] or -1 for padding; got min -2, "
        "max 1",
    ):
        check_index_tensor(torch.tensor([[-2, 1]]), "sets", 3, padding=True)
    empty = check_index_tensor(
        torch.zeros(0, 2, dtype=torch.int32), "pairs", 3, width=2
    )
    assert empty.dtype == torch.long and empty.shape == (0, 2)


def test_constructor_errors():
    with pytest.raises(
        InputDataError,
        match="noise_std must be a finite positive float; got noise_std=inf",
    ):
        PlackettLuceLikelihood(noise_std=float("inf"))
    with pytest.raises(
        InputDataError, match="num_samples must be a positive integer; got 0"
    ):
        ThurstoneRankingLikelihood(num_samples=0)


def test_empty_answer_sets_give_empty_results():
    lik = JustNoticeableDifferenceLikelihood()
    u = torch.zeros(2, 4)
    out = lik.log_prob_answers(
        u, torch.zeros(0, 2, dtype=torch.long), torch.tensor([[0, 1]])
    )
    assert out.shape == (2, 1)
    ell = lik.expected_log_prob_answers(
        u, torch.ones(2, 4), torch.zeros(0, 2, dtype=torch.long)
    )
    assert ell.shape == (2, 0)


def test_single_utility_likelihood_rejects_multitask_distributions():
    lik = JustNoticeableDifferenceLikelihood()
    dist = MultitaskMultivariateNormal(torch.zeros(3, 2), torch.eye(6))
    with pytest.raises(
        InputDataError,
        match="has one utility per design; got a multitask distribution with 2 tasks",
    ):
        lik.expected_log_prob(torch.tensor([[0, 1]]), dist)


def test_forward_is_finite_for_certain_answers():
    lik = PlackettLuceLikelihood()
    u = torch.zeros(2, 3)
    dist = lik(
        u, torch.tensor([[0, -1, -1], [2, 1, 0]])
    )  # a one-label ordering has p = 1
    assert dist.probs[0].item() == pytest.approx(1.0)
    assert bool(torch.isfinite(dist.log_prob(torch.ones(2))).all())
