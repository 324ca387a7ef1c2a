import math

import pytest
import torch
from scipy import optimize, special

from prefbo.inference import find_mode, laplace_evidence
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.utils.testing import make_pairwise_data, tolerance


def _rbf(X, lengthscale, outputscale):
    return outputscale * torch.exp(-torch.cdist(X, X).pow(2) / (2 * lengthscale**2))


def test_mode_is_stationary_point_of_log_posterior(tkwargs):
    X, comp, _ = make_pairwise_data(25, 60, **tkwargs)
    K = _rbf(X, 0.4, 2.0) + 1e-4 * torch.eye(25, **tkwargs)
    lik = PairwiseProbitLikelihood()
    state = find_mode(torch.linalg.cholesky(K), comp, lik)
    assert bool(state.converged)
    f = state.mode.double().clone().requires_grad_(True)
    Kd = K.double()
    psi = lik.log_prob_answers(f, comp).sum() - 0.5 * f @ torch.linalg.solve(Kd, f)
    (grad,) = torch.autograd.grad(psi, f)
    assert grad.abs().max().item() < tolerance(tkwargs["dtype"], 1e-7, 2e-2)
    # alpha is K^-1 f
    torch.testing.assert_close(
        state.alpha.double(),
        torch.linalg.solve(Kd, state.mode.double()),
        rtol=tolerance(tkwargs["dtype"], 1e-8, 5e-2),
        atol=tolerance(tkwargs["dtype"], 1e-6, 1e-2),
    )


@pytest.mark.parametrize("sigma", [1.0, 0.1, 0.01, 0.001])
def test_single_answer_mode_matches_scalar_root_beyond_clamp(sigma):
    """Two designs, one answer: the mode solves Δ = v0 λ(Δ/s)/s (scalar root)."""
    K = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    v0 = 4.0 + 3.0 - 2.0
    s = math.sqrt(2) * sigma
    lik = PairwiseProbitLikelihood(noise_std=sigma)
    state = find_mode(torch.linalg.cholesky(K), torch.tensor([[0, 1]]), lik)

    def eq(delta):  # independent: scipy's log_ndtr
        z = delta / s
        lam = math.exp(-0.5 * z * z - 0.5 * math.log(2 * math.pi) - special.log_ndtr(z))
        return delta - v0 * lam / s

    delta = optimize.brentq(eq, 0.0, 100.0, xtol=1e-14)
    a = torch.tensor([1.0, -1.0], dtype=torch.float64)
    expected = (delta / v0) * (K @ a)
    torch.testing.assert_close(state.mode, expected, rtol=1e-8, atol=1e-10)
    if sigma <= 0.01:  # decisive: beyond BoTorch's clamp |z| <= 3
        assert delta / s > 3


def test_precision_and_whitened_forms_agree():
    X, comp, _ = make_pairwise_data(60, 200, d=3, seed=7)
    K = _rbf(X, 0.8, 5.0) + 1e-6 * torch.eye(60, dtype=torch.float64)
    lik = PairwiseProbitLikelihood()
    out = {}
    for form in ("whitened", "precision"):
        Kr = K.clone().requires_grad_(True)
        ev, state = laplace_evidence(Kr, comp, lik, form=form)
        ev.backward()
        out[form] = (ev, state.mode, Kr.grad)
    (e1, m1, g1), (e2, m2, g2) = out["whitened"], out["precision"]
    assert e1.item() == pytest.approx(e2.item(), rel=1e-9)
    torch.testing.assert_close(m1, m2, rtol=0, atol=1e-6)
    assert ((g1 - g2).norm() / g1.norm()).item() < 1e-6


def test_batched_mode_equals_loop(tkwargs):
    X, comp, _ = make_pairwise_data(15, 30, batch_shape=torch.Size([2, 3]), **tkwargs)
    K = _rbf(X, 0.5, 1.5) + 1e-3 * torch.eye(15, **tkwargs)
    L = torch.linalg.cholesky(K)
    lik = PairwiseProbitLikelihood()
    batched = find_mode(L, comp, lik)
    for i in range(2):
        for j in range(3):
            single = find_mode(L[i, j], comp[i, j], lik)
            torch.testing.assert_close(
                batched.mode[i, j],
                single.mode,
                rtol=tolerance(tkwargs["dtype"], 1e-9, 1e-3),
                atol=1e-5,
            )
            torch.testing.assert_close(
                batched.evidence[i, j],
                single.evidence,
                rtol=tolerance(tkwargs["dtype"], 1e-9, 1e-4),
                atol=1e-4,
            )
