import math

import pytest
import torch
from scipy import optimize, special

from prefbo.inference import find_mode, laplace_evidence
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.models import PairwiseLaplaceGP
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


def test_precision_form_reaches_the_true_mode_when_k_is_ill_conditioned():
    # cond(K) ~ 1e9-1e10 (140 designs in 3-d, outputscale 4, nugget 1e-8):
    # the loop on the explicit K⁻¹ alone stopped 2e-4 from the mode with every
    # convergence test passed; refined, it matches the whitened form
    g = torch.Generator().manual_seed(1)
    X = torch.rand(140, 3, dtype=torch.float64, generator=g)
    u = (X * torch.tensor([3.0, -2.0, 1.0], dtype=torch.float64)).sum(-1) * 3
    C = torch.randint(0, 140, (300, 2), generator=g)
    C = C[C[:, 0] != C[:, 1]]
    C = torch.where((u[C[:, 0]] > u[C[:, 1]]).unsqueeze(-1), C, C.flip(-1))
    K = _rbf(X, 0.6, 4.0)
    K = K + 1e-8 * K.diagonal().mean() * torch.eye(140, dtype=torch.float64)
    assert torch.linalg.cond(K).item() > 1e8
    L = torch.linalg.cholesky(K)
    lik = PairwiseProbitLikelihood()
    ref = find_mode(L, C, lik, form="whitened", tol=1e-14)
    for tol in (1e-9, 1e-6):
        state = find_mode(L, C, lik, form="precision", tol=tol)
        assert state.form == "precision"
        scale = 1.0 + ref.mode.abs().max().item()
        assert (state.mode - ref.mode).abs().max().item() < 10 * tol * scale
        assert state.evidence.item() == pytest.approx(ref.evidence.item(), abs=1e-7)


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


def test_warm_start_reaches_same_mode():
    X, comp, _ = make_pairwise_data(30, 80, seed=1)
    lik = PairwiseProbitLikelihood()
    L1 = torch.linalg.cholesky(
        _rbf(X, 0.3, 1.0) + 1e-6 * torch.eye(30, dtype=torch.float64)
    )
    L2 = torch.linalg.cholesky(
        _rbf(X, 0.6, 20.0) + 1e-6 * torch.eye(30, dtype=torch.float64)
    )
    old = find_mode(L1, comp, lik).mode
    cold, warm = find_mode(L2, comp, lik), find_mode(L2, comp, lik, init=old)
    torch.testing.assert_close(cold.mode, warm.mode, rtol=1e-8, atol=1e-9)


def test_warm_start_after_new_answers_on_the_same_designs():
    # the previous state has fewer comparisons than the data now: its
    # curvature cannot seed the first-order prediction (it used to crash)
    X, comp, _ = make_pairwise_data(20, 30, seed=3)
    model = PairwiseLaplaceGP(X, comp[:20])
    model.train()
    model(*model.train_inputs)  # a training pass leaves a warm state
    model.set_train_data(X, comp, update_model=False)
    evidence = model(*model.train_inputs).evidence
    fresh = PairwiseLaplaceGP(X, comp)
    fresh.train()
    # training passes stop Newton at fit_tol = 1e-6: evidences agree to that
    torch.testing.assert_close(
        evidence, fresh(*fresh.train_inputs).evidence, rtol=1e-6, atol=0
    )


def test_warm_start_from_state_needs_one_newton_step():
    # at the same K a previous mode is exact: the warm start from the state
    # (f0 = K α, no likelihood pass) lands on it and one Newton step confirms it
    X, comp, _ = make_pairwise_data(30, 80, seed=1)
    lik = PairwiseProbitLikelihood()
    L = torch.linalg.cholesky(
        _rbf(X, 0.4, 3.0) + 1e-6 * torch.eye(30, dtype=torch.float64)
    )
    for form in ("precision", "whitened"):
        cold = find_mode(L, comp, lik, form=form)
        warm = find_mode(L, comp, lik, init=cold, form=form)
        assert warm.iterations == 1 < cold.iterations
        # both within Newton's tolerance (1e-9 relative) of the exact mode
        torch.testing.assert_close(warm.mode, cold.mode, rtol=0, atol=1e-8)
        torch.testing.assert_close(warm.evidence, cold.evidence, rtol=1e-10, atol=0)
