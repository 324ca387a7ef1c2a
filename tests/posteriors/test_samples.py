import pytest
import torch
from botorch.sampling.get_sampler import get_sampler
from botorch.sampling.normal import SobolQMCNormalSampler

from prefbo.posteriors.samples import SkewGPPosterior


def _posterior(S=6, batch_shape=(2,), q=3, seed=0, **tkwargs):
    g = torch.Generator().manual_seed(seed)
    locations = torch.randn(S, *batch_shape, q, generator=g, dtype=torch.float64)
    A = torch.randn(*batch_shape, q, q, generator=g, dtype=torch.float64)
    residual = A @ A.transpose(-1, -2) / q + 0.1 * torch.eye(q, dtype=torch.float64)
    return SkewGPPosterior(locations.to(**tkwargs), residual.to(**tkwargs))


def test_moments_are_those_of_the_draws_plus_the_residual(tkwargs):
    post = _posterior(**tkwargs)
    loc = post.locations.double().cpu()  # S x 2 x 3, a numpy-style check
    torch.testing.assert_close(post.mean.squeeze(-1).double().cpu(), loc.mean(0))
    emp = torch.stack([torch.cov(loc[:, b].T) for b in range(2)])
    expected = emp + post.residual_covariance.double().cpu()
    torch.testing.assert_close(post.covariance_matrix.double().cpu(), expected)
    torch.testing.assert_close(
        post.variance.squeeze(-1), post.covariance_matrix.diagonal(dim1=-2, dim2=-1)
    )
    assert post.num_draws == 6 and post.dtype == tkwargs["dtype"]
    assert post.base_sample_shape == (2, 3, 1)
    assert post._extended_shape(torch.Size([4])) == (4, 2, 3, 1)


def test_each_draw_is_one_stored_location_plus_the_gaussian_residual(tkwargs64):
    post = _posterior(**tkwargs64)
    base = torch.randn(12, 2, 3, 1, **tkwargs64)
    draws = post.rsample_from_base_samples(torch.Size([12]), base)
    assert draws.shape == (12, 2, 3, 1)
    root = torch.linalg.cholesky(post.residual_covariance)
    location = draws.squeeze(-1) - (root @ base).squeeze(-1)
    # every stored draw is used once per S consecutive samples, in a fixed order
    order = post._order
    for i in range(12):
        torch.testing.assert_close(location[i], post.locations[order[i % 6]])
    assert sorted(order.tolist()) == list(range(6))
    # same seed, same order; the residual part is linear in the base samples
    again = SkewGPPosterior(post.locations, post.residual_covariance)
    torch.testing.assert_close(
        again.rsample_from_base_samples(torch.Size([12]), base), draws
    )


def test_monte_carlo_moments_match_the_posterior_moments():
    torch.manual_seed(0)
    post = _posterior(S=8)
    draws = post.rsample(torch.Size([80000])).squeeze(-1)  # each location 10000x
    torch.testing.assert_close(draws.mean(0), post.mean.squeeze(-1), rtol=0, atol=0.02)
    centred = draws - draws.mean(0)
    cov = torch.einsum("n...i,n...j->...ij", centred, centred) / draws.shape[0]
    # population covariance of the S draws (divisor S) plus the residual
    loc = post.locations - post.locations.mean(0)
    pop = torch.einsum("s...i,s...j->...ij", loc, loc) / 8
    torch.testing.assert_close(cov, pop + post.residual_covariance, rtol=0, atol=0.03)


def test_botorch_gives_it_a_qmc_normal_sampler():
    post = _posterior()
    sampler = get_sampler(post, torch.Size([16]), seed=3)
    assert isinstance(sampler, SobolQMCNormalSampler)
    assert sampler(post).shape == (16, 2, 3, 1)


def test_base_samples_of_another_sample_shape_are_refused():
    post = _posterior()
    with pytest.raises(RuntimeError, match=r"must start with sample_shape \(4,\)"):
        post.rsample_from_base_samples(torch.Size([4]), torch.randn(5, 2, 3, 1))
