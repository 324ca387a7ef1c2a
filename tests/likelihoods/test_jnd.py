import math

import mpmath
import numpy as np
import pytest
import torch
from scipy import stats

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.likelihoods.jnd import JustNoticeableDifferenceLikelihood
from prefbo.likelihoods.testing import LikelihoodContract


def random_pairs(g: torch.Generator, n: int, m: int) -> torch.Tensor:
    i = torch.randint(n, (m,), generator=g)
    j = (i + torch.randint(1, n, (m,), generator=g)) % n
    return torch.stack([i, j], -1)


class TestJNDContract(LikelihoodContract):
    def create_likelihood(self):
        return JustNoticeableDifferenceLikelihood(threshold=0.4, noise_std=0.7)

    def create_answers(self, g):
        return random_pairs(g, self.num_designs, 6), random_pairs(
            g, self.num_designs, 3
        )

    def forward_answers(self, answers):
        return (answers[0],)

    def reference_log_prob(self, u, answers):
        """The JND likelihood written out with scipy, one answer at a time."""
        s, t = math.sqrt(2) * 0.7, 0.4
        out = []
        for w, l in answers[0].tolist():
            out.append(stats.norm.logcdf((u[w].item() - u[l].item() - t) / s))
        for i, j in answers[1].tolist():
            d = u[i].item() - u[j].item()
            out.append(
                np.log(stats.norm.cdf((t - d) / s) - stats.norm.cdf((-t - d) / s))
            )
        return torch.tensor(out, dtype=torch.float64)


def test_answer_frequencies_match_simulated_people():
    """Simulate the hard JND model on noisy utilities and count the answers."""
    sigma, delta = 0.6, 0.5
    lik = JustNoticeableDifferenceLikelihood(threshold=delta, noise_std=sigma).double()
    u = torch.tensor([0.0, 0.3, 1.2, -0.8], dtype=torch.float64)
    pairs = torch.tensor([[0, 1], [2, 3], [1, 2], [3, 0]])
    probs = lik(u, pairs).probs  # m x 3
    g = torch.Generator().manual_seed(3)
    num = 200_000
    noisy = u + sigma * torch.randn(num, 4, generator=g, dtype=torch.float64)
    diff = noisy[:, pairs[:, 0]] - noisy[:, pairs[:, 1]]
    freq = torch.stack([diff > delta, diff < -delta, diff.abs() <= delta], -1).double()
    freq = freq.mean(0)
    se = (probs * (1 - probs) / num).sqrt()
    assert bool(((freq - probs).abs() <= 4 * se + 1e-12).all()), (freq, probs)
    torch.testing.assert_close(probs.sum(-1), torch.ones(4, dtype=torch.float64))


def test_log_probabilities_are_accurate_far_in_the_tails():
    """60-digit references: decisive differences and a tiny threshold."""
    mpmath.mp.dps = 60
    delta = 1e-6
    lik = JustNoticeableDifferenceLikelihood(threshold=delta).double()
    u = torch.tensor([0.0, 60.0, 1e-7], dtype=torch.float64)
    out = lik.log_prob_answers(
        u, torch.tensor([[0, 1]]), torch.tensor([[0, 1], [0, 2]])
    )
    s = mpmath.sqrt(2)
    t = mpmath.mpf(delta)

    def indiscernible(d):
        a, b = (t - mpmath.mpf(d)) / s, (-t - mpmath.mpf(d)) / s
        return float(mpmath.log(mpmath.ncdf(-b) - mpmath.ncdf(-a)))  # Φ(a) − Φ(b)

    assert out[0].item() == pytest.approx(
        float(mpmath.log(mpmath.ncdf((-60 - t) / s))), rel=1e-12
    )
    assert out[1].item() == pytest.approx(indiscernible(-60.0), rel=1e-9)
    assert out[2].item() == pytest.approx(indiscernible(-1e-7), rel=1e-6)


def test_threshold_is_a_learnable_positive_parameter():
    lik = JustNoticeableDifferenceLikelihood(threshold=0.3).double()
    assert lik.threshold.item() == pytest.approx(0.3)
    u = torch.tensor([0.2, 0.0], dtype=torch.float64)
    lik.log_prob_answers(
        u, torch.tensor([[0, 1]]), torch.tensor([[0, 1]])
    ).sum().backward()
    assert lik.raw_threshold.grad is not None
    lik.threshold = 2.0
    assert lik.threshold.item() == pytest.approx(2.0)


def test_errors():
    with pytest.raises(InputDataError, match="threshold must be a finite float > 0"):
        JustNoticeableDifferenceLikelihood(threshold=0.0)
    with pytest.raises(InputDataError, match="noise_std must be a finite float > 0"):
        JustNoticeableDifferenceLikelihood(noise_std=-1.0)
    lik = JustNoticeableDifferenceLikelihood()
    u = torch.zeros(3)
    with pytest.raises(InputTypeError, match="comparisons must be an integer"):
        lik.log_prob_answers(u, torch.tensor([[0.0, 1.0]]))
    with pytest.raises(InputDataError, match=r"indiscernible must have shape m_b x 2"):
        lik.log_prob_answers(u, torch.tensor([[0, 1]]), torch.tensor([0, 1]))
    with pytest.raises(
        InputDataError, match=r"comparisons must hold indices in \[0, 2\]"
    ):
        lik.log_prob_answers(u, torch.tensor([[0, 3]]))
    with pytest.raises(InputTypeError, match="utilities must be a floating"):
        lik.log_prob_answers(torch.zeros(3, dtype=torch.long), torch.tensor([[0, 1]]))
    with pytest.raises(
        InputDataError, match="covariance must be a batch_shape x n x n"
    ):
        lik.expected_log_prob_answers(u, torch.zeros(2, 2), torch.tensor([[0, 1]]))


def _mp_log_ndtr_diff(a, b):
    return float(mpmath.log(mpmath.ncdf(a) - mpmath.ncdf(b)))


@pytest.mark.parametrize(
    ("sigma", "mu", "var"),
    [(0.1 / math.sqrt(2), -5.0, 1.0), (0.1, 3.0, 4.0), (1.0, -8.0, 16.0)],
)
def test_log_marginal_is_the_closed_form_when_the_sd_exceeds_the_noise(sigma, mu, var):
    """E[Φ((Δ−δ)/s)] = Φ((μ−δ)/√(s²+v)); indiscernible: the widened interval."""
    delta = 0.5
    lik = JustNoticeableDifferenceLikelihood(threshold=delta, noise_std=sigma)
    lik = lik.double()
    mean = torch.tensor([mu, 0.0], dtype=torch.float64)  # Δ = f_0 − f_1 = μ
    cov = torch.tensor([[var, 0.0], [0.0, 0.0]], dtype=torch.float64)
    got = lik.log_marginal_answers(
        mean, cov, torch.tensor([[0, 1], [1, 0]]), torch.tensor([[0, 1]])
    )
    w = math.sqrt(lik.scale**2 + var)
    ref = [
        stats.norm.logcdf((mu - delta) / w),
        stats.norm.logcdf((-mu - delta) / w),
        _mp_log_ndtr_diff(mpmath.mpf(delta - mu) / w, mpmath.mpf(-delta - mu) / w),
    ]
    torch.testing.assert_close(got, torch.tensor(ref, dtype=torch.float64))


def test_log_marginal_closed_form_gradients():
    lik = JustNoticeableDifferenceLikelihood(threshold=0.4, noise_std=0.2).double()
    comps, ind = torch.tensor([[0, 1], [2, 0]]), torch.tensor([[1, 2]])
    mean = torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
    root = torch.tensor(
        [[1.0, 0.0, 0.0], [0.3, 0.8, 0.0], [-0.2, 0.1, 1.1]], dtype=torch.float64
    ).requires_grad_(True)

    def fn(m, r):
        return lik.log_marginal_answers(m, r @ r.T, comps, ind)

    assert torch.autograd.gradcheck(fn, (mean, root))
    lik.log_marginal_answers(mean, root @ root.T, comps, ind).sum().backward()
    assert lik.raw_threshold.grad is not None
    assert bool(torch.isfinite(lik.raw_threshold.grad))


@pytest.mark.parametrize("value", [-0.5, 0.0, float("nan"), float("inf")])
def test_threshold_setter_rejects_invalid_values(value):
    lik = JustNoticeableDifferenceLikelihood(threshold=0.5)
    with pytest.raises(
        InputDataError, match=r"threshold must be a finite float > 0; got threshold="
    ):
        lik.threshold = value
    with pytest.raises(InputDataError, match="threshold must be a finite float > 0"):
        lik.threshold = torch.tensor(value)
    assert lik.threshold.item() == pytest.approx(0.5)
    with pytest.raises(InputTypeError, match="threshold must be a finite float > 0"):
        lik.threshold = True
    lik.threshold = torch.tensor([0.7])
    assert lik.threshold.item() == pytest.approx(0.7)


def test_self_comparisons_are_rejected():
    lik = JustNoticeableDifferenceLikelihood(0.5)
    f = torch.tensor([0.3, -0.2, 1.0])
    with pytest.raises(
        InputDataError,
        match=r"comparisons must pair two different designs; row 1 is \[1, 1\]",
    ):
        lik.log_prob_answers(f, torch.tensor([[0, 1], [1, 1]]))
    with pytest.raises(
        InputDataError,
        match=r"indiscernible must pair two different designs; row 0 is \[2, 2\]",
    ):
        lik.log_marginal_answers(
            f, torch.ones(3), torch.tensor([[0, 1]]), torch.tensor([[2, 2]])
        )
    with pytest.raises(InputDataError, match="pairs must pair two different"):
        lik(f, torch.tensor([[0, 0]]))
