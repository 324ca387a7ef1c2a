import numpy as np
import torch
from scipy.optimize import minimize
from scipy.stats import norm

from prefbo.likelihoods import PairwiseLogitLikelihood, PairwiseProbitLikelihood
from prefbo.models.collaborative.people import laplace_people


def problem(B=3, A=7, D=4, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    delta = torch.randn(B, A, D, generator=g, dtype=torch.float64)
    offset = 0.5 * torch.randn(B, A, generator=g, dtype=torch.float64)
    mask = torch.rand(B, A, generator=g) < 0.8
    prior = 0.3 * torch.randn(B, D, generator=g, dtype=torch.float64)
    return [
        t.to(dtype) if t.is_floating_point() else t
        for t in (delta, offset, mask, prior)
    ]


def scipy_mode(delta, offset, mask, prior, s):
    r"""The mode and negative Hessian by scipy, from the log-density alone."""
    d, c, keep = delta[mask].numpy(), offset[mask].numpy(), prior.numpy()

    def negative(z):
        return -(norm.logcdf((c + d @ z) / s).sum() - 0.5 * ((z - keep) ** 2).sum())

    z = minimize(negative, keep, method="BFGS", options={"gtol": 1e-11}).x
    h, D = 1e-4, len(z)
    grad = lambda z: np.array(  # noqa: E731
        [(negative(z + h * e) - negative(z - h * e)) / (2 * h) for e in np.eye(D)]
    )
    hess = np.stack([(grad(z + h * e) - grad(z - h * e)) / (2 * h) for e in np.eye(D)])
    return z, hess


def test_mode_and_precision_match_scipy():
    delta, offset, mask, prior = problem()
    lik = PairwiseProbitLikelihood(noise_std=0.7)
    post = laplace_people(lik, delta, offset, mask, prior)
    for b in range(3):
        z, hess = scipy_mode(delta[b], offset[b], mask[b], prior[b], lik.scale)
        np.testing.assert_allclose(post.mean[b].numpy(), z, atol=1e-6)
        H = (post.precision_chol[b] @ post.precision_chol[b].T).numpy()
        np.testing.assert_allclose(H, hess, atol=1e-3)


def test_batch_equals_one_at_a_time_and_start_is_irrelevant():
    delta, offset, mask, prior = problem(B=4)
    lik = PairwiseLogitLikelihood()
    both = laplace_people(lik, delta, offset, mask, prior)
    for b in range(4):
        one = laplace_people(
            lik,
            delta[b : b + 1],
            offset[b : b + 1],
            mask[b : b + 1],
            prior[b : b + 1],
            start=torch.full((1, 4), 3.0, dtype=torch.float64),
        )
        torch.testing.assert_close(one.mean[0], both.mean[b], atol=1e-8, rtol=0)
        torch.testing.assert_close(
            one.precision_chol[0], both.precision_chol[b], atol=1e-8, rtol=0
        )


def test_padding_is_ignored_and_no_answers_give_the_prior():
    delta, offset, mask, prior = problem(B=2)
    lik = PairwiseProbitLikelihood()
    post = laplace_people(lik, delta, offset, mask, prior)
    delta2, offset2 = delta.clone(), offset.clone()
    delta2[~mask], offset2[~mask] = 50.0, -50.0
    again = laplace_people(lik, delta2, offset2, mask, prior)
    torch.testing.assert_close(again.mean, post.mean, atol=1e-10, rtol=0)
    empty = laplace_people(lik, delta[:, :0], offset[:, :0], mask[:, :0], prior)
    torch.testing.assert_close(empty.mean, prior)
    torch.testing.assert_close(
        empty.covariance(), torch.eye(4, dtype=torch.float64).expand(2, 4, 4)
    )


def test_float32_agrees_with_float64():
    lik = PairwiseProbitLikelihood()
    post64 = laplace_people(lik, *problem())
    post32 = laplace_people(lik, *problem(dtype=torch.float32))
    torch.testing.assert_close(post32.mean.double(), post64.mean, atol=1e-4, rtol=0)


def test_covariance_and_whitened_rows():
    post = laplace_people(PairwiseProbitLikelihood(), *problem())
    H = post.precision_chol @ post.precision_chol.mT
    eye = torch.eye(4, dtype=torch.float64).expand(3, 4, 4)
    torch.testing.assert_close(H @ post.covariance(), eye, atol=1e-10, rtol=0)
    rows = torch.randn(3, 5, 4, dtype=torch.float64)
    var = (post.whitened(rows) ** 2).sum(-2)
    direct = torch.einsum("bnd,bde,bne->bn", rows, post.covariance(), rows)
    torch.testing.assert_close(var, direct)


def test_a_newton_run_that_does_not_converge_says_so():
    import pytest

    from prefbo.exceptions import NumericalWarning

    g = torch.Generator().manual_seed(0)
    delta = 1e6 * torch.randn(2, 200, 6, generator=g, dtype=torch.float64)
    offset = 1e6 * torch.randn(2, 200, generator=g, dtype=torch.float64)
    mask, prior = torch.ones(2, 200, dtype=torch.bool), torch.zeros(2, 6).double()
    # logit answers that no utility explains, at differences that saturate
    with pytest.warns(NumericalWarning, match="did not converge in 100 Newton steps"):
        laplace_people(PairwiseLogitLikelihood(), delta, offset, mask, prior)
