import math

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.stats import multivariate_normal

from prefbo.likelihoods.orthant import (
    log_mixed_sign_probability,
    log_orthant_probability,
)


def _scipy_orthant(mean, cov):
    """P(W > 0) = P(−W + m < m), −W + m ~ N(0, C): the cdf at m."""
    mvn = multivariate_normal(np.zeros(len(mean)), cov, abseps=1e-12, releps=1e-10)
    return mvn.cdf(np.asarray(mean))


@pytest.mark.parametrize(
    ("mean", "cov"),
    [
        ([0.5, -1.0], [[1.0, 0.5], [0.5, 2.0]]),
        ([-2.0, -1.5], [[1.0, -0.7], [-0.7, 1.3]]),
        ([1.0, 0.2, -0.5], [[1.0, 0.3, 0.1], [0.3, 1.5, -0.4], [0.1, -0.4, 0.8]]),
    ],
)
def test_log_orthant_probability_matches_scipy(mean, cov):
    got = log_orthant_probability(
        torch.tensor(mean, dtype=torch.float64),
        torch.tensor(cov, dtype=torch.float64),
        num_samples=4096,
    )
    ref = math.log(_scipy_orthant(mean, np.array(cov)))
    assert got.item() == pytest.approx(ref, abs=1e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_independent_coordinates_are_exact_far_in_the_tails(dtype):
    mean = torch.tensor([-40.0, 3.0, -7.0], dtype=dtype)
    var = torch.tensor([2.0, 0.5, 1.0], dtype=dtype)
    got = log_orthant_probability(mean, torch.diag(var), num_samples=8)
    ref = stats.norm.logcdf((mean / var.sqrt()).double().numpy()).sum()
    assert got.dtype == dtype
    assert got.item() == pytest.approx(
        ref, rel=1e-6 if dtype == torch.float32 else 1e-12
    )


def test_batches_and_gradients():
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(3, 2, dtype=torch.float64, generator=g)
    a = torch.randn(3, 2, 2, dtype=torch.float64, generator=g)
    root = (a + 2 * torch.eye(2, dtype=torch.float64)).requires_grad_(True)
    mean.requires_grad_(True)
    out = log_orthant_probability(mean, root @ root.mT, 64)
    for i in range(3):
        single = log_orthant_probability(mean[i], root[i] @ root[i].T, 64)
        torch.testing.assert_close(out[i], single)

    def fn(m, r):
        return log_orthant_probability(m, r @ r.mT + torch.eye(2).double(), 64)

    assert torch.autograd.gradcheck(fn, (mean, root))


def test_mixed_signs_complement_the_two_orthants():
    mean = torch.tensor([0.4, -0.3, 0.8], dtype=torch.float64)
    cov = torch.tensor(
        [[1.0, 0.3, 0.1], [0.3, 1.5, -0.4], [0.1, -0.4, 0.8]], dtype=torch.float64
    )
    got = log_mixed_sign_probability(mean, cov, num_samples=4096)
    p_pos = _scipy_orthant(mean.numpy(), cov.numpy())
    p_neg = _scipy_orthant(-mean.numpy(), cov.numpy())
    assert got.item() == pytest.approx(math.log(1 - p_pos - p_neg), abs=1e-5)
    # tiny conflict probability (independent: exact), where 1 − a − b cancels
    mean = torch.tensor([30.0, 30.0], dtype=torch.float64)
    got = log_mixed_sign_probability(mean, torch.eye(2, dtype=torch.float64), 8)
    ref = stats.norm.logsf(30.0) + math.log(2.0) + math.log1p(-stats.norm.sf(30.0))
    assert got.item() == pytest.approx(ref, rel=1e-12)
