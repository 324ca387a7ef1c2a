import math

import pytest
import torch
from scipy import special

import prefbo.inference.laplacian as laplacian
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
