import math

import pytest
import torch
from gpytorch.distributions import MultitaskMultivariateNormal

from prefbo.data import ChoiceSets, LabelComparisons, PairwiseComparisons, Rankings
from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.likelihoods import (
    PairedLabelLikelihood,
    PairwiseLogitLikelihood,
    PairwiseProbitLikelihood,
    ParetoPreferenceLikelihood,
    PreferenceLikelihood,
    PseudoRationalChoiceLikelihood,
    RationalChoiceLikelihood,
)
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
        match="noise_std must be a finite float > 0; got noise_std=inf",
    ):
        PlackettLuceLikelihood(noise_std=float("inf"))
    with pytest.raises(
        InputDataError, match="num_samples must be an int >= 1; got num_samples=0"
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


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"noise_std": True},
            InputTypeError,
            r"noise_std must be a finite float > 0; got bool True\.",
        ),
        (
            {"qmc_seed": 1.7},
            InputTypeError,
            r"qmc_seed must be an int >= 0; got float 1\.7\.",
        ),
        (
            {"qmc_seed": -3},
            InputDataError,
            "qmc_seed must be an int >= 0; got qmc_seed=-3",
        ),
        (
            {"num_samples": True},
            InputTypeError,
            "num_samples must be an int >= 1; got bool True",
        ),
        (
            {"num_samples": 2.0},
            InputTypeError,
            "num_samples must be an int >= 1; got float 2.0",
        ),
    ],
)
def test_constructor_rejects_coerced_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        ThurstoneRankingLikelihood(**kwargs)
    with pytest.raises(
        InputTypeError, match="num_grid must be an int >= 8; got float 64.0"
    ):
        ThurstoneRankingLikelihood(num_grid=64.0)


def test_single_utility_joint_covariance_broadcasts_over_the_batch():
    """An unbatched n x n joint covariance is the joint for every batch entry."""
    lik = JustNoticeableDifferenceLikelihood(0.3).double()
    n = 3
    mean = torch.randn(4, n, dtype=torch.float64)
    cov = torch.tensor(
        [[1.0, 0.99, 0.0], [0.99, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64
    )
    comps = torch.tensor([[0, 1], [2, 0]])
    got = lik.log_marginal_answers(mean, cov, comps)
    # closed form with the joint: var(f_0 − f_1) = 0.02, var(f_2 − f_0) = 2
    vd = torch.tensor([0.02, 2.0], dtype=torch.float64)
    md = mean[:, comps[:, 0]] - mean[:, comps[:, 1]]
    ref = torch.special.log_ndtr((md - 0.3) / (lik.scale**2 + vd).sqrt())
    torch.testing.assert_close(got, ref)


def test_single_utility_ambiguous_covariance_shape_is_rejected():
    """Batch 3 over n = 3 designs: a 3 x 3 covariance reads both ways."""
    lik = JustNoticeableDifferenceLikelihood(0.3)
    mean = torch.zeros(3, 3, dtype=torch.float64)
    cov = torch.eye(3, dtype=torch.float64) + 0.5
    with pytest.raises(
        InputDataError,
        match=r"covariance of shape \(3, 3\) is ambiguous for a mean of shape "
        r"\(3, 3\).*torch.diag_embed\(covariance\).*covariance.expand\(\(3, 3, 3\)\)",
    ):
        lik.expected_log_prob_answers(mean, cov, torch.tensor([[0, 1]]))
    # both explicit layouts work and differ as they should
    joint = lik.log_marginal_answers(mean, cov.expand(3, 3, 3), torch.tensor([[0, 1]]))
    var = lik.log_marginal_answers(mean, torch.diag_embed(cov), torch.tensor([[0, 1]]))
    w_joint = math.sqrt(lik.scale**2 + 2.0)  # 1.5 + 1.5 − 2·0.5
    ref_joint = torch.full((3, 1), _log_ndtr(-0.3 / w_joint), dtype=torch.float64)
    torch.testing.assert_close(joint, ref_joint)
    # variances: batch entry i has the diagonal of row i, [1.5, .5, .5] etc.
    v_diff = torch.tensor([2.0, 2.0, 1.0], dtype=torch.float64)
    ref_var = torch.special.log_ndtr(-0.3 / (lik.scale**2 + v_diff).sqrt())
    torch.testing.assert_close(var, ref_var.unsqueeze(-1))


def _log_ndtr(x):
    from scipy import stats

    return float(stats.norm.logcdf(x))


@pytest.mark.parametrize(
    "lik, data_type",
    [
        (PairwiseProbitLikelihood(), PairwiseComparisons),
        (PairwiseLogitLikelihood(), PairwiseComparisons),
        (JustNoticeableDifferenceLikelihood(), PairwiseComparisons),
        (ParetoPreferenceLikelihood(), PairwiseComparisons),
        (RationalChoiceLikelihood(), ChoiceSets),
        (PseudoRationalChoiceLikelihood(), ChoiceSets),
        (PairedLabelLikelihood(), LabelComparisons),
        (PlackettLuceLikelihood(), Rankings),
        (ThurstoneRankingLikelihood(), Rankings),
    ],
    ids=lambda x: type(x).__name__ if isinstance(x, PreferenceLikelihood) else "",
)
def test_every_likelihood_declares_the_container_it_reads(lik, data_type):
    assert isinstance(lik, PreferenceLikelihood) and lik.data_type is data_type
    X = torch.rand(4, 2, dtype=torch.float64)
    pairs = PairwiseComparisons(X, torch.tensor([[0, 1]]), torch.tensor([[2, 3]]))
    if data_type is PairwiseComparisons:
        lik.check_data(PairwiseComparisons(X, torch.tensor([[0, 1]])))
        return
    with pytest.raises(
        InputTypeError,
        match=f"{type(lik).__name__} reads {data_type.__name__} data; got "
        "PairwiseComparisons.",
    ):
        lik.check_data(pairs)
