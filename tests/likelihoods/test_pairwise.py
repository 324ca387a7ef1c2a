import math

import numpy as np
import pytest
import torch
from botorch.models.likelihoods.pairwise import (
    PairwiseLogitLikelihood as BoTorchLogit,
)
from botorch.models.likelihoods.pairwise import (
    PairwiseProbitLikelihood as BoTorchProbit,
)
from scipy import integrate, stats
from scipy.special import log_expit

from prefbo.data import ChoiceSets, PairwiseComparisons
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.likelihoods import (
    JustNoticeableDifferenceLikelihood,
    PairwiseLogitLikelihood,
    PairwiseProbitLikelihood,
    PreferenceLikelihood,
    as_prefbo_likelihood,
    pairwise_expected_log_prob,
)
from prefbo.likelihoods.testing import LikelihoodContract


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
    with pytest.raises(
        InputDataError, match="noise_std must be a finite float > 0; got noise_std=0.0"
    ):
        PairwiseProbitLikelihood(noise_std=0.0)
    with pytest.raises(InputTypeError, match="likelihood must be None, a prefbo"):
        as_prefbo_likelihood("probit")


def test_constructor_rejects_coerced_noise_std():
    with pytest.raises(
        InputTypeError, match=r"noise_std must be a finite float > 0; got bool True"
    ):
        PairwiseProbitLikelihood(noise_std=True)
    with pytest.raises(
        InputTypeError, match="noise_std must be a finite float > 0; got str '1.0'"
    ):
        PairwiseLogitLikelihood(noise_std="1.0")


@pytest.mark.parametrize("cls", [PairwiseProbitLikelihood, PairwiseLogitLikelihood])
def test_log_prob_answers_broadcasts_comparisons_over_the_batch(cls):
    lik = cls(noise_std=0.6)
    f = torch.randn(4, 5, dtype=torch.float64)
    comps = torch.tensor([[0, 1], [3, 2], [4, 0]])
    out = lik.log_prob_answers(f, comps)
    assert out.shape == (4, 3)
    z = (f[:, comps[:, 0]] - f[:, comps[:, 1]]) / lik.scale
    ref = stats.norm.logcdf(z.numpy()) if cls is PairwiseProbitLikelihood else None
    if ref is None:
        ref = -np.logaddexp(0.0, -z.numpy())
    torch.testing.assert_close(out, torch.as_tensor(ref))
    # derivatives broadcast the same way (views only)
    logp = lik.derivatives(f, comps)[0]
    torch.testing.assert_close(logp, out)
    assert lik(f, comps).probs.shape == (4, 3)


def test_log_prob_answers_index_errors():
    lik = PairwiseProbitLikelihood()
    f = torch.tensor([0.3, -0.2, 1.0], dtype=torch.float64)
    with pytest.raises(
        InputDataError,
        match=r"comparisons must hold indices into the utilities in \[0, 2\] "
        r"\(n=3\); got min 0, max 3",
    ):
        lik.log_prob_answers(f, torch.tensor([[0, 3]]))
    with pytest.raises(InputDataError, match="got min -1, max 0"):
        lik.log_prob_answers(f, torch.tensor([[0, -1]]))
    with pytest.raises(
        InputTypeError, match="comparisons must be an integer .long. tensor"
    ):
        lik.log_prob_answers(f, torch.tensor([[0.0, 1.0]]))
    with pytest.raises(InputDataError, match=r"shape batch_shape x m x 2.*got \(2,\)"):
        lik.log_prob_answers(f, torch.tensor([0, 1]))
    with pytest.raises(
        InputDataError,
        match=r"utility and comparisons must have broadcastable batch shapes; got "
        r"utility batch \(4,\) and comparisons batch \(3,\)",
    ):
        lik.log_prob_answers(f.expand(4, 3), torch.zeros(3, 1, 2, dtype=torch.long))


def test_padding_rows_give_the_constant_log_f0():
    """[i, i] rows are the documented padding of batched data: log F(0)."""
    f = torch.tensor([0.3, -0.2, 1.0], dtype=torch.float64)
    out = PairwiseProbitLikelihood().log_prob_answers(f, torch.tensor([[1, 1]]))
    assert out.item() == pytest.approx(math.log(0.5))


@pytest.mark.parametrize(("sigma", "mu", "var"), [(0.1, -5.0, 1.0), (1.0, 2.0, 9.0)])
def test_probit_log_predictive_probability_is_the_closed_form(sigma, mu, var):
    lik = PairwiseProbitLikelihood(noise_std=sigma)
    mean, v = torch.tensor([mu], dtype=torch.float64), torch.tensor([var])
    got = lik.log_predictive_probability(mean, v.double())
    ref = stats.norm.logcdf(mu / math.sqrt(2 * sigma**2 + var))
    assert got.item() == pytest.approx(ref, rel=1e-12)


def test_logit_log_predictive_probability_matches_scipy_quad():
    from scipy import integrate, special

    lik = PairwiseLogitLikelihood(noise_std=1.0 / math.sqrt(2))  # s = 1
    for mu, sd in [(-3.0, 1.0), (1.0, 2.0)]:
        got = lik.log_predictive_probability(
            torch.tensor(mu, dtype=torch.float64), torch.tensor(sd**2)
        )

        def f(x, mu=mu, sd=sd):
            return special.expit(x) * stats.norm.pdf(x, mu, sd)

        ref = integrate.quad(f, mu - 15 * sd, mu + 15 * sd, epsabs=0, limit=200)[0]
        assert got.item() == pytest.approx(math.log(ref), abs=1e-6)


@pytest.mark.parametrize(
    "lik, fn",
    [
        (PairwiseProbitLikelihood(0.7), stats.norm.logcdf),
        (PairwiseLogitLikelihood(0.7), log_expit),
    ],
)
def test_pairwise_expected_log_prob_matches_scipy_quad(lik, fn):
    s = 0.7 * math.sqrt(2)
    mean = torch.tensor([0.0, 1.5, -3.0, 0.4, -6.0], dtype=torch.float64)
    var = torch.tensor([1.0, 0.2, 4.0, 0.0, 9.0], dtype=torch.float64)
    out = pairwise_expected_log_prob(lik, mean, var, num_points=30)
    for i in range(5):
        m, v = mean[i].item(), var[i].item()
        if v == 0:
            ref = fn(m / s)
        else:
            sd = math.sqrt(v)
            ref = integrate.quad(
                lambda d, m=m, sd=sd: fn(d / s) * stats.norm.pdf(d, m, sd),
                m - 12 * sd,
                m + 12 * sd,
                epsabs=1e-13,
            )[0]
        assert out[i].item() == pytest.approx(ref, rel=1e-6, abs=1e-10)


def test_pairwise_expected_log_prob_rejects_other_likelihoods():
    with pytest.raises(
        InputTypeError, match="likelihood must be a prefbo PairwiseLikelihood"
    ):
        pairwise_expected_log_prob(
            JustNoticeableDifferenceLikelihood(), torch.zeros(1), torch.ones(1)
        )


def random_pairs(g: torch.Generator, n: int, m: int) -> torch.Tensor:
    i = torch.randint(n, (m,), generator=g)
    j = (i + torch.randint(1, n, (m,), generator=g)) % n
    return torch.stack([i, j], -1)


class TestPairwiseProbitContract(LikelihoodContract):
    def create_likelihood(self):
        return PairwiseProbitLikelihood(noise_std=0.7)

    def create_answers(self, g):
        return (random_pairs(g, self.num_designs, 6),)

    def reference_log_prob(self, u, answers):
        (comp,) = answers
        z = (u[comp[:, 0]] - u[comp[:, 1]]) / (math.sqrt(2) * 0.7)
        return torch.from_numpy(stats.norm.logcdf(z.numpy()))


class TestPairwiseLogitContract(LikelihoodContract):
    def create_likelihood(self):
        return PairwiseLogitLikelihood(noise_std=0.7)

    def create_answers(self, g):
        return (random_pairs(g, self.num_designs, 6),)

    def reference_log_prob(self, u, answers):
        (comp,) = answers
        z = (u[comp[:, 0]] - u[comp[:, 1]]) / (math.sqrt(2) * 0.7)
        return torch.from_numpy(-np.logaddexp(0.0, -z.numpy()))


@pytest.mark.parametrize("cls", [PairwiseProbitLikelihood, PairwiseLogitLikelihood])
def test_pairwise_likelihoods_are_preference_likelihoods(cls):
    lik = cls(noise_std=0.5)
    assert isinstance(lik, PreferenceLikelihood) and not lik.multi_output
    assert lik.data_type is PairwiseComparisons
    X = torch.rand(3, 2, dtype=torch.float64)
    lik.check_data(PairwiseComparisons(X, torch.tensor([[0, 1]])))
    with pytest.raises(
        InputTypeError, match=f"{cls.__name__} reads PairwiseComparisons data; got"
    ):
        lik.check_data(
            ChoiceSets(X, torch.tensor([[0, 1]]), torch.tensor([[True, False]]))
        )
    with pytest.raises(UnsupportedError, match="reads comparisons only; got data"):
        lik.check_data(
            PairwiseComparisons(
                X, torch.tensor([[0, 1]]), indiscernible=torch.tensor([[1, 2]])
            )
        )


@pytest.mark.parametrize("cls", [PairwiseProbitLikelihood, PairwiseLogitLikelihood])
def test_expectations_are_gauss_hermite_and_the_predictive_probability(cls):
    """The preference interface equals the pairwise pieces it is made of."""
    lik = cls(noise_std=0.6)
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(4, generator=g, dtype=torch.float64)
    a = torch.randn(4, 4, generator=g, dtype=torch.float64)
    cov = a @ a.T / 4 + 0.1 * torch.eye(4, dtype=torch.float64)
    comp = torch.tensor([[0, 1], [3, 2], [1, 3]])
    mean_diff = mean[comp[:, 0]] - mean[comp[:, 1]]
    var_diff = cov[comp[:, 0], comp[:, 0]] + cov[comp[:, 1], comp[:, 1]]
    var_diff = var_diff - 2 * cov[comp[:, 0], comp[:, 1]]
    torch.testing.assert_close(
        lik.expected_log_prob_answers(mean, cov, comp),
        pairwise_expected_log_prob(lik, mean_diff, var_diff),
    )
    torch.testing.assert_close(
        lik.log_marginal_answers(mean, cov, comp),
        lik.log_predictive_probability(mean_diff, var_diff),
    )
