import math

import pytest
import torch
from botorch.models.likelihoods.pairwise import (
    PairwiseLogitLikelihood as BoTorchLogit,
)
from botorch.models.likelihoods.pairwise import (
    PairwiseProbitLikelihood as BoTorchProbit,
)
from scipy import stats

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.likelihoods import (
    PairwiseLogitLikelihood,
    PairwiseProbitLikelihood,
    as_prefbo_likelihood,
)


def _D(comp, n):
    D = torch.zeros(comp.shape[0], n, dtype=torch.float64)
    D[torch.arange(comp.shape[0]), comp[:, 0]] = 1
    D[torch.arange(comp.shape[0]), comp[:, 1]] = -1
    return D


@pytest.mark.parametrize("sigma", [1.0, 0.3])
def test_probit_log_prob_matches_scipy(sigma):
    f = torch.tensor([0.3, -1.2, 2.5, 0.0], dtype=torch.float64)
    comp = torch.tensor([[0, 1], [2, 3], [1, 2], [3, 0]])
    lik = PairwiseProbitLikelihood(noise_std=sigma)
    expected = stats.norm.logcdf(
        ((f[comp[:, 0]] - f[comp[:, 1]]) / (math.sqrt(2) * sigma)).numpy()
    )
    torch.testing.assert_close(
        lik.log_prob_answers(f, comp), torch.from_numpy(expected), rtol=1e-12, atol=0
    )


@pytest.mark.parametrize(
    "ours, theirs, zmax",
    [(PairwiseProbitLikelihood(), BoTorchProbit(), 3), (None, BoTorchLogit(), 8)],
)
def test_botorch_likelihoods_convert_to_the_same_probabilities(ours, theirs, zmax):
    converted = as_prefbo_likelihood(theirs)
    f = torch.linspace(-2, 2, 7, dtype=torch.float64)
    comp = torch.tensor([[0, 6], [5, 1], [2, 3], [4, 4 - 1]])
    D = _D(comp, 7)
    torch.testing.assert_close(
        converted.log_prob_answers(f, comp).exp(), theirs.p(f, D), rtol=1e-10, atol=0
    )
    # BoTorch's gradient/Hessian sums agree inside its clamp
    _, g, w, _ = converted.derivatives(f, comp)
    torch.testing.assert_close(
        -(g.unsqueeze(-1) * D).sum(0), theirs.negative_log_gradient_sum(f, D)
    )
    torch.testing.assert_close(
        D.T @ (w.unsqueeze(-1) * D), theirs.negative_log_hessian_sum(f, D)
    )


def test_probit_is_not_clamped_like_botorch():
    """At z = 5 BoTorch's gradient uses z = 3; prefbo's is the true λ(5)/s."""
    f = torch.tensor([5 * math.sqrt(2), 0.0], dtype=torch.float64)
    comp = torch.tensor([[0, 1]])
    _, g, _, _ = PairwiseProbitLikelihood().derivatives(f, comp)
    lam5 = math.exp(stats.norm.logpdf(5.0) - stats.norm.logcdf(5.0))
    assert g.item() == pytest.approx(lam5 / math.sqrt(2), rel=1e-10)
    bt = -BoTorchProbit().negative_log_gradient_sum(f, _D(comp, 2))[0].item()
    assert abs(bt - g.item()) > 10 * g.item()  # BoTorch's clamp: λ(3) >> λ(5)


@pytest.mark.parametrize(
    "lik", [PairwiseProbitLikelihood(0.5), PairwiseLogitLikelihood(0.5)]
)
def test_predictive_probability_matches_monte_carlo(lik):
    mean = torch.tensor([0.0, 0.7, -1.5, 3.0], dtype=torch.float64)
    var = torch.tensor([0.0, 0.5, 2.0, 9.0], dtype=torch.float64)
    p = lik.predictive_probability(mean, var)
    g = torch.Generator().manual_seed(0)
    z = torch.randn(400_000, 4, generator=g, dtype=torch.float64)
    delta = mean + var.sqrt() * z
    mc = lik._log_prob(delta / lik.scale).exp().mean(0)
    torch.testing.assert_close(p, mc, rtol=0, atol=3e-3)


@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
def test_forward_gives_bernoulli_over_answers(batch):
    lik = PairwiseProbitLikelihood()
    f = torch.randn(batch + (5,), dtype=torch.float64)
    comp = torch.tensor([[0, 1], [3, 2]]).expand(batch + (2, 2))
    dist = lik(f, comp)
    assert dist.probs.shape == batch + (2,)
    expected = torch.special.ndtr((f[..., [0, 3]] - f[..., [1, 2]]) / math.sqrt(2))
    torch.testing.assert_close(dist.probs, expected)


def test_likelihood_errors():
    with pytest.raises(InputDataError, match="noise_std must be a finite positive"):
        PairwiseProbitLikelihood(noise_std=0.0)
    with pytest.raises(InputTypeError, match="likelihood must be None, a prefbo"):
        as_prefbo_likelihood("probit")
