import math

import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from scipy import special

import prefbo.inference.laplacian as laplacian
import prefbo.inference.stiff as stiff
from prefbo import PairwiseLaplaceGP, PairwiseLaplaceMLL
from prefbo.inference import laplace_evidence
from prefbo.likelihoods import PairwiseLogitLikelihood, PairwiseProbitLikelihood
from prefbo.utils.testing import make_pairwise_data


def _rbf(X, lengthscale, outputscale):
    return outputscale * torch.exp(-torch.cdist(X, X).pow(2) / (2 * lengthscale**2))


def test_evidence_equals_quadrature_on_one_answer():
    """log Z_Laplace for one answer vs its closed form in the scalar difference."""
    K = torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=torch.float64)
    lik = PairwiseProbitLikelihood(noise_std=0.5)
    ev, state = laplace_evidence(K, torch.tensor([[1, 0]]), lik)
    v0, s = 2.0 + 1.0 - 1.0, math.sqrt(2) * 0.5
    d = (state.mode[1] - state.mode[0]).item()
    z = d / s
    lam = math.exp(-0.5 * z * z - 0.5 * math.log(2 * math.pi) - special.log_ndtr(z))
    w = lam * (z + lam) / s**2
    expected = special.log_ndtr(z) - 0.5 * d * d / v0 - 0.5 * math.log1p(v0 * w)
    assert ev.item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    "form, eps, rel", [("whitened", 1e-6, 1e-5), ("precision", 1e-4, 1e-4)]
)
@pytest.mark.parametrize(
    "lik", [PairwiseProbitLikelihood(0.7), PairwiseLogitLikelihood()]
)
def test_evidence_gradient_matches_finite_differences(lik, form, eps, rel):
    X, comp, _ = make_pairwise_data(20, 45, seed=3)
    theta = torch.tensor([0.35, 2.5], dtype=torch.float64, requires_grad=True)

    def K_of(t):
        return _rbf(X, t[0], t[1]) + 1e-6 * torch.eye(20, dtype=torch.float64)

    ev, state = laplace_evidence(K_of(theta), comp, lik, form=form)
    assert state.form == form
    (grad,) = torch.autograd.grad(ev, theta)
    for k in range(2):
        e = torch.zeros(2, dtype=torch.float64)
        e[k] = eps
        plus, _ = laplace_evidence(K_of(theta.detach() + e), comp, lik, form=form)
        minus, _ = laplace_evidence(K_of(theta.detach() - e), comp, lik, form=form)
        fd = (plus - minus).item() / (2 * eps)
        assert grad[k].item() == pytest.approx(fd, rel=rel, abs=1e-7)


def test_evidence_gradient_through_sparse_laplacian_equals_dense(monkeypatch):
    # n above the dense threshold: the sparse W of the gradient's products
    # gives the dense path's gradient
    n = laplacian.DENSE_BELOW + 22
    X, comp, _ = make_pairwise_data(n, 3 * n, d=2, seed=11)
    comp[1] = comp[0]  # a repeated pair: the CSR assembly sums duplicates
    K = _rbf(X, 0.4, 2.0) + 1e-6 * torch.eye(n, dtype=torch.float64)
    lik = PairwiseProbitLikelihood()
    grads = []
    for threshold in (laplacian.DENSE_BELOW, n + 1):  # sparse, then dense
        monkeypatch.setattr(laplacian, "DENSE_BELOW", threshold)
        Kr = K.clone().requires_grad_(True)
        ev, _ = laplace_evidence(Kr, comp, lik)
        ev.backward()
        grads.append(Kr.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-10, atol=1e-10)


def _chain_with_repeats(n=8):
    torch.manual_seed(0)
    X = torch.rand(n, 2, dtype=torch.float64)
    comps = torch.tensor([[i, i + 1] for i in range(n - 1)] + [[0, 1], [1, 0], [2, 4]])
    K = torch.exp(-0.5 * torch.cdist(X, X) ** 2 / 0.4**2)
    return X, comps, K + 1e-6 * torch.eye(n, dtype=torch.float64)


@pytest.mark.parametrize("noise_std", [1.0, 0.1])
def test_stiff_evidence_and_gradient_equal_the_formed_ones(monkeypatch, noise_std):
    # the stiff path (projector P, no formed system) forced at a moderate
    # curvature, where the formed system is accurate too
    _, comps, K0 = _chain_with_repeats()
    lik = PairwiseProbitLikelihood(noise_std=noise_std)
    E = torch.randn(*K0.shape, dtype=torch.float64)
    E = E + E.T
    out = []
    for limit in (math.inf, 0.0):
        monkeypatch.setitem(stiff.STIFF_LIMIT, torch.float64, limit)
        K = K0.clone().requires_grad_(True)
        ev, state = laplace_evidence(K, comps, lik, form="whitened", tol=1e-14)
        ev.backward()
        out.append((ev.detach(), (K.grad * E).sum(), state))
    assert out[0][2]._projector is None and out[1][2]._projector is not None
    torch.testing.assert_close(out[1][0], out[0][0], rtol=1e-11, atol=1e-11)
    torch.testing.assert_close(out[1][1], out[0][1], rtol=1e-5, atol=1e-8)


def test_evidence_gradient_at_tiny_noise_matches_finite_differences():
    # noise 1e-6: stiff (ω ~ 1e11); the formed W - WΣW lost every digit
    _, comps, K0 = _chain_with_repeats()
    lik = PairwiseProbitLikelihood(noise_std=1e-6)
    E = torch.randn(*K0.shape, dtype=torch.float64)
    E = E + E.T
    K = K0.clone().requires_grad_(True)
    ev, state = laplace_evidence(K, comps, lik, tol=1e-14)
    ev.backward()
    assert state._projector is not None
    h = 1e-5
    fd = [laplace_evidence(K0 + t * h * E, comps, lik, tol=1e-14)[0] for t in (-1, 1)]
    torch.testing.assert_close(
        (K.grad * E).sum(), (fd[1] - fd[0]) / (2 * h), rtol=1e-2, atol=1e-6
    )


@pytest.mark.parametrize("noise_std", [1e-8, 1e-10])
def test_fit_at_tiny_noise(noise_std):
    # formerly "Cholesky of I + Lᵀ W L failed" out of the fit
    X, comps, _ = _chain_with_repeats()
    model = PairwiseLaplaceGP(
        X, comps, likelihood=PairwiseProbitLikelihood(noise_std=noise_std)
    )
    fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model))
    var = model.posterior(X).variance.detach().squeeze(-1)
    prior = model.covar_module(X).to_dense().diagonal().detach()
    assert bool((var > 0).all()) and bool((var <= prior).all())
