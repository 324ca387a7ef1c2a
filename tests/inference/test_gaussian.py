import pytest
import torch

from prefbo import PairwiseLaplaceGP
from prefbo.exceptions import UnsupportedError
from prefbo.inference.gaussian import GaussianApproximation
from prefbo.likelihoods import PairwiseProbitLikelihood


def _approximation(n=6, m=9, batch_shape=(), seed=0, **tkwargs):
    r"""An approximation at random ``K``, comparisons and weights ``ω > 0``,
    with its dense ``K`` and ``Ŵ = Dᵀ diag(ω) D`` built by hand."""
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(*batch_shape, n, n, generator=g, dtype=torch.float64)
    K = A @ A.transpose(-1, -2) / n + 0.5 * torch.eye(n, dtype=torch.float64)
    count = torch.Size(batch_shape).numel() * m
    pairs = [torch.randperm(n, generator=g)[:2] for _ in range(count)]
    comp = torch.stack(pairs).reshape(*batch_shape, m, 2)
    omega = 0.1 + torch.rand(*batch_shape, m, generator=g, dtype=torch.float64)
    D = torch.zeros(*batch_shape, m, n, dtype=torch.float64)
    D.scatter_(-1, comp[..., :1], 1.0)
    D.scatter_add_(-1, comp[..., 1:], -torch.ones(*batch_shape, m, 1, dtype=D.dtype))
    W = D.transpose(-1, -2) @ (omega.unsqueeze(-1) * D)
    K, W, omega = K.to(**tkwargs), W.to(**tkwargs), omega.to(**tkwargs)
    comp = comp.to(tkwargs.get("device"))
    zeros = torch.zeros(*batch_shape, n, **tkwargs)
    state = GaussianApproximation(
        mode=zeros,
        chol_prior=torch.linalg.cholesky(K),
        alpha=zeros,
        curvature=omega,
        comparisons=comp,
        log_likelihood=zeros.sum(-1),
        evidence=zeros.sum(-1),
        converged=torch.ones(batch_shape, dtype=torch.bool),
        iterations=0,
        form="whitened",
    )
    return state, K, W


@pytest.mark.parametrize("batch_shape", [(), (3,)])
def test_posterior_covariance_is_the_dense_inverse_of_the_precision(
    tkwargs64, batch_shape
):
    state, K, W = _approximation(batch_shape=batch_shape, **tkwargs64)
    torch.testing.assert_close(state.laplacian(), W)
    expected = torch.linalg.inv(torch.linalg.inv(K) + W)
    torch.testing.assert_close(state.posterior_covariance(), expected)
    F = state.covariance_root()
    torch.testing.assert_close(F @ F.transpose(-1, -2), expected)
    assert state.posterior_covariance() is state.posterior_covariance()  # cached


def test_the_factors_of_the_predictive_equations(tkwargs64):
    state, K, W = _approximation(**tkwargs64)
    L, C = state.chol_prior, state.chol_post
    eye = torch.eye(K.shape[-1], **tkwargs64)
    torch.testing.assert_close(C @ C.T, eye + L.T @ W @ L)
    assert torch.equal(C, C.tril())
    factors = state.predictive_factors()
    assert factors.shape == (2, 6, 6)
    torch.testing.assert_close(factors[0], L)
    torch.testing.assert_close(factors[1], L @ C)
    # the predictive variance k** - uᵀu + wᵀw at a training design is Σ's
    # diagonal (u = L⁻¹ k*, w = (L C)⁻¹ k*, k* a column of K)
    u = torch.linalg.solve_triangular(factors[0], K, upper=False)
    w = torch.linalg.solve_triangular(factors[1], K, upper=False)
    var = K.diagonal() - u.square().sum(0) + w.square().sum(0)
    torch.testing.assert_close(var, state.posterior_covariance().diagonal())


def test_float32_agrees_with_float64(tkwargs):
    state, K, W = _approximation(**tkwargs)
    expected = torch.linalg.inv(torch.linalg.inv(K.double()) + W.double())
    rtol = 1e-9 if tkwargs["dtype"] == torch.float64 else 1e-4
    torch.testing.assert_close(
        state.posterior_covariance().double(), expected, rtol=rtol, atol=rtol
    )


def test_a_stiff_state_refuses_the_factor_it_does_not_hold():
    # contradicting answers at noise 1e-8: the curvature is ~1e16 and the
    # state holds P = I - A⁻¹ instead of C; forming A = I + LᵀŴL would lose
    # the prior's I to rounding, so C (and [L, L C]) are refused by name
    torch.manual_seed(0)
    model = PairwiseLaplaceGP(
        torch.rand(3, 2, dtype=torch.float64),
        torch.tensor([[0, 1], [1, 0]]),
        likelihood=PairwiseProbitLikelihood(noise_std=1e-8),
    )
    state = model.approximation
    assert state.projected_reduction() is not None  # the stiff form
    with pytest.raises(UnsupportedError, match="stiff.*projected_reduction"):
        _ = state.chol_post
    with pytest.raises(UnsupportedError, match="stiff.*projected_reduction"):
        state.predictive_factors()
    # what the stiff form does provide is exact: Σ within [0, K] on its diagonal
    S = state.posterior_covariance()
    K = state.chol_prior @ state.chol_prior.mT
    assert (S.diagonal() >= -1e-12).all() and (
        S.diagonal() <= K.diagonal() + 1e-12
    ).all()
