import math

import torch

from prefbo.likelihoods import DifferenceLikelihood, difference_moments
from prefbo.likelihoods.base import AnswerIndex, check_index_tensor
from prefbo.likelihoods.quadrature import gaussian_expectation_1d


class _Probit(DifferenceLikelihood):
    r"""The smallest difference likelihood: ``Φ(Δ / s)``, default log marginal."""

    multi_output = False

    def _index(self, num_designs, num_outputs, comparisons):
        rows = check_index_tensor(comparisons, "comparisons", num_designs, width=2)
        return AnswerIndex(designs=rows, outputs=torch.zeros_like(rows))

    def _log_prob_difference(self, delta, index):
        return torch.special.log_ndtr(delta / self.scale)


def test_expectations_are_one_dimensional_on_the_difference():
    lik = _Probit(noise_std=0.8, num_points=30)
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(2, 5, generator=g, dtype=torch.float64)
    a = torch.randn(2, 5, 5, generator=g, dtype=torch.float64)
    cov = a @ a.mT / 5 + 0.1 * torch.eye(5, dtype=torch.float64)
    comp = torch.tensor([[0, 1], [4, 2], [3, 0]])
    mean_diff, var_diff = difference_moments(mean, cov, comp)
    expected = gaussian_expectation_1d(
        lambda d: torch.special.log_ndtr(d / lik.scale), mean_diff, var_diff, 30
    )
    torch.testing.assert_close(lik.expected_log_prob_answers(mean, cov, comp), expected)
    # the default log marginal (Gauss–Hermite of the log-sum-exp) against the
    # probit's closed form log Φ(μ / √(s² + v))
    closed = torch.special.log_ndtr(mean_diff / (lik.scale**2 + var_diff).sqrt())
    torch.testing.assert_close(
        lik.log_marginal_answers(mean, cov, comp), closed, rtol=0, atol=1e-4
    )
    assert math.isclose(lik.scale, math.sqrt(2) * 0.8)
