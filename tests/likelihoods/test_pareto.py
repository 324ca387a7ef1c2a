import math

import numpy as np
import pytest
import torch
from scipy import stats

from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.likelihoods.pareto import ParetoPreferenceLikelihood
from prefbo.likelihoods.testing import LikelihoodContract


def random_pairs(g, n, m):
    i = torch.randint(n, (m,), generator=g)
    j = (i + torch.randint(1, n, (m,), generator=g)) % n
    return torch.stack([i, j], -1)


def reference(u, comparisons, conflicts, sigma):
    """The Pareto likelihood with scipy, one answer at a time."""
    s = math.sqrt(2) * sigma
    d = u.shape[-1]
    out = []
    for x, y in comparisons.tolist():
        out.append(
            sum(stats.norm.logcdf((u[x, i] - u[y, i]).item() / s) for i in range(d))
        )
    for x, y in conflicts.tolist():
        a = math.prod(stats.norm.cdf((u[x, i] - u[y, i]).item() / s) for i in range(d))
        b = math.prod(stats.norm.cdf((u[y, i] - u[x, i]).item() / s) for i in range(d))
        out.append(math.log(1 - a - b))
    return torch.tensor(out, dtype=torch.float64)


class TestParetoTwoUtilities(LikelihoodContract):
    num_outputs = 2
    sigma = 0.8

    def create_likelihood(self):
        return ParetoPreferenceLikelihood(noise_std=self.sigma)

    def create_answers(self, g):
        return random_pairs(g, self.num_designs, 5), random_pairs(
            g, self.num_designs, 3
        )

    def forward_answers(self, answers):
        return (answers[0],)

    def reference_log_prob(self, u, answers):
        return reference(u, *answers, self.sigma)


class TestParetoThreeUtilities(TestParetoTwoUtilities):
    num_outputs = 3
    sigma = 1.0


def test_answer_frequencies_match_simulated_people():
    """Every utility of every design gets its own noise draw in each comparison."""
    sigma = 0.7
    lik = ParetoPreferenceLikelihood(noise_std=sigma).double()
    u = torch.tensor(
        [[0.0, 0.5], [0.4, -0.2], [1.0, 1.5], [-0.5, 0.1]], dtype=torch.float64
    )
    pairs = torch.tensor([[0, 1], [2, 3], [1, 3], [0, 2]])
    probs = lik(u, pairs).probs  # m x 3
    g = torch.Generator().manual_seed(5)
    num = 200_000
    noisy_x = u[pairs[:, 0]] + sigma * torch.randn(
        num, 4, 2, generator=g, dtype=torch.float64
    )
    noisy_y = u[pairs[:, 1]] + sigma * torch.randn(
        num, 4, 2, generator=g, dtype=torch.float64
    )
    first = (noisy_x > noisy_y).all(-1)
    second = (noisy_y > noisy_x).all(-1)
    freq = torch.stack([first, second, ~first & ~second], -1).double().mean(0)
    se = (probs * (1 - probs) / num).sqrt()
    assert bool(((freq - probs).abs() <= 4 * se + 1e-12).all()), (freq, probs)


def test_one_utility_is_the_pairwise_probit():
    lik = ParetoPreferenceLikelihood(noise_std=0.5).double()
    u = torch.tensor([[0.3], [-0.4], [1.1]], dtype=torch.float64)
    comp = torch.tensor([[0, 1], [1, 2], [2, 0]])
    expected = stats.norm.logcdf(
        (u[comp[:, 0], 0] - u[comp[:, 1], 0]).numpy() / (0.5 * math.sqrt(2))
    )
    torch.testing.assert_close(
        lik.log_prob_answers(u, comp), torch.from_numpy(expected)
    )
    assert lik(u, comp).probs[:, 2].abs().max() == 0  # no conflicts with d = 1


def test_conflicts_need_two_utilities():
    lik = ParetoPreferenceLikelihood()
    with pytest.raises(
        UnsupportedError, match="conflicts need at least d = 2 utilities"
    ):
        lik.log_prob_answers(
            torch.zeros(3, 1), torch.tensor([[0, 1]]), torch.tensor([[1, 2]])
        )


def _independent_lm(mean, var, s):
    """Σ_i log Φ(μ_i / √(s² + v_i)) for independent designs and outputs."""
    md = (mean[0] - mean[1]).numpy()
    vd = (var[0] + var[1]).numpy()
    return stats.norm.logcdf(md / np.sqrt(s**2 + vd)).sum()


@pytest.mark.parametrize(
    ("sigma", "scale"), [(1.0, 1.0), (1.0, 3.0), (0.2, 1.0), (0.1, 2.0)]
)
def test_log_marginal_is_exact_for_independent_outputs(sigma, scale):
    lik = ParetoPreferenceLikelihood(noise_std=sigma)
    mean = torch.tensor([[-1.0, -0.5], [1.0, 1.0]], dtype=torch.float64) * scale
    var = torch.ones(2, 2, dtype=torch.float64)
    got = lik.log_marginal_answers(mean, var, torch.tensor([[0, 1]]), num_samples=16)
    ref = _independent_lm(mean, var, lik.scale)
    assert got.item() == pytest.approx(ref, rel=1e-9)


def _bvn_joint(rho):
    """Joint design-major covariance of 2 designs x 2 outputs, outputs correlated."""
    block = torch.tensor([[1.0, rho], [rho, 1.0]], dtype=torch.float64)
    return torch.block_diag(block, 0.5 * block)


@pytest.mark.parametrize("rho", [0.6, -0.8])
def test_log_marginal_with_correlated_outputs_matches_scipy(rho):
    from scipy.stats import multivariate_normal

    lik = ParetoPreferenceLikelihood(noise_std=0.5)
    s = lik.scale
    mean = torch.tensor([[0.3, -0.4], [0.0, 0.2]], dtype=torch.float64)
    cov = _bvn_joint(rho)
    comps, conf = torch.tensor([[0, 1], [1, 0]]), torch.tensor([[0, 1]])
    got = lik.log_marginal_answers(mean, cov, comps, conf, num_samples=1024)
    # w = (u_x − u_y)/s + ε ~ N(m, C/s² + I); P(x ≻ y) = P(w > 0)
    c_w = (1.5 * np.array([[1.0, rho], [rho, 1.0]])) / s**2 + np.eye(2)
    m_w = ((mean[0] - mean[1]) / s).numpy()
    mvn = multivariate_normal(np.zeros(2), c_w, abseps=1e-12, releps=1e-10)
    p_xy, p_yx = mvn.cdf(m_w), mvn.cdf(-m_w)
    ref = np.log([p_xy, p_yx, 1.0 - p_xy - p_yx])
    torch.testing.assert_close(got, torch.as_tensor(ref), rtol=0, atol=2e-4)


def test_log_marginal_is_accurate_far_in_the_tails():
    """σ = 0.1, correlated outputs: a careful 1-D integral as the reference."""
    from scipy import integrate

    lik = ParetoPreferenceLikelihood(noise_std=0.1)
    s = lik.scale
    mean = torch.tensor([[-2.0, -1.0], [2.0, 2.0]], dtype=torch.float64)
    cov = _bvn_joint(0.5)
    got = lik.log_marginal_answers(mean, cov, torch.tensor([[0, 1]]))
    c = 1.5 * np.array([[1.0, 0.5], [0.5, 1.0]]) / s**2 + np.eye(2)
    m = ((mean[0] - mean[1]) / s).numpy()
    # P(w1 > 0, w2 > 0) = ∫_0^∞ N(w1; m1, c11) Φ((m2 + c12/c11 (w1 − m1)) / sd) dw1,
    # scaled by the peak so that quad sees an O(1) integrand
    sd = math.sqrt(c[1, 1] - c[0, 1] ** 2 / c[0, 0])

    def log_f(w):
        return stats.norm.logpdf(w, m[0], math.sqrt(c[0, 0])) + stats.norm.logcdf(
            (m[1] + c[0, 1] / c[0, 0] * (w - m[0])) / sd
        )

    grid = np.linspace(0, 100, 20001)
    peak = log_f(grid).max()
    val = integrate.quad(lambda w: math.exp(log_f(w) - peak), 0, 100, limit=500)[0]
    ref = peak + math.log(val)
    assert ref < -8  # unlikely under q: plain QMC of Π Φ was tens of nats off
    assert got.item() == pytest.approx(ref, abs=2e-3)


def test_log_marginal_error_falls_with_the_sample_count():
    from scipy.stats import multivariate_normal

    lik = ParetoPreferenceLikelihood(noise_std=0.5)
    s = lik.scale
    mean = torch.tensor([[0.3, -0.4], [0.0, 0.2]], dtype=torch.float64)
    c_w = (1.5 * np.array([[1.0, 0.6], [0.6, 1.0]])) / s**2 + np.eye(2)
    m_w = ((mean[0] - mean[1]) / s).numpy()
    ref = math.log(
        multivariate_normal(np.zeros(2), c_w, abseps=1e-12, releps=1e-10).cdf(m_w)
    )
    errors = [
        abs(
            lik.log_marginal_answers(
                mean, _bvn_joint(0.6), torch.tensor([[0, 1]]), num_samples=num
            ).item()
            - ref
        )
        for num in (16, 4096)
    ]
    assert errors[1] < errors[0] / 10 and errors[1] < 1e-5


def test_self_pairs_are_rejected():
    lik = ParetoPreferenceLikelihood()
    u = torch.randn(3, 2)
    with pytest.raises(
        InputDataError,
        match=r"comparisons must pair two different designs; row 0 is \[1, 1\]",
    ):
        lik.log_prob_answers(u, torch.tensor([[1, 1]]))
    with pytest.raises(
        InputDataError,
        match=r"conflicts must pair two different designs; row 0 is \[2, 2\]",
    ):
        lik.log_prob_answers(u, torch.tensor([[0, 2]]), torch.tensor([[2, 2]]))
    with pytest.raises(InputDataError, match="pairs must pair two different"):
        lik(u, torch.tensor([[0, 0]]))
