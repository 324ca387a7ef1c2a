import math

import pytest
import torch
from scipy import optimize, special

from prefbo.inference import find_mode, laplace_evidence
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.models import PairwiseLaplaceGP
from prefbo.utils.testing import make_pairwise_data, random_answers, tolerance


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


def _random_answers_on_a_periodic_kernel(shift=0.0):
    # an outside trial's data (seed 45: 8 designs in [0, 1]^3, 97 random
    # answers) and prior-free Matérn-1/2 x periodic kernel near its start
    from gpytorch.kernels import MaternKernel, PeriodicKernel

    X, comp = random_answers(45)
    kernel = (MaternKernel(nu=0.5) * PeriodicKernel()).double()
    with torch.no_grad():
        kernel.kernels[0].lengthscale = 0.95 + shift
        kernel.kernels[1].lengthscale = 1.1 - shift
        kernel.kernels[1].period_length = 0.47 + shift
        K = kernel(X).to_dense()
    return K, comp


@pytest.mark.parametrize("form", ["precision", "whitened"])
def test_evidence_belongs_to_the_returned_mode(form):
    # the last Newton step moves the mode off the point its system was
    # factorised at; the log det and evidence must be those of the returned
    # mode (computed at the previous iterate, the evidence was off by the step
    # times d log|A| / df and ended L-BFGS-B's line searches)
    lik = PairwiseProbitLikelihood()
    K_near, comp = _random_answers_on_a_periodic_kernel(0.01)
    K, _ = _random_answers_on_a_periodic_kernel()
    L = torch.linalg.cholesky(K)
    near = find_mode(torch.linalg.cholesky(K_near), comp, lik, tol=1e-6, form=form)
    for init in (None, near):
        state = find_mode(L, comp, lik, init, tol=1e-6, form=form)
        assert state.form == form
        f = state.mode
        log_p, _, omega, _ = lik.derivatives(f, comp)
        n = f.shape[-1]
        D = torch.zeros(comp.shape[0], n, dtype=torch.float64)
        D[torch.arange(comp.shape[0]), comp[:, 0]] = 1.0
        D[torch.arange(comp.shape[0]), comp[:, 1]] = -1.0
        A = torch.eye(n, dtype=torch.float64) + K @ D.T @ (omega[:, None] * D)
        expected = (
            log_p.sum() - 0.5 * f @ torch.linalg.solve(K, f) - 0.5 * A.det().log()
        )
        torch.testing.assert_close(state.evidence, expected, rtol=1e-12, atol=0)


def test_fit_evidence_does_not_depend_on_the_warm_start():
    # a fit's evidence (Newton to tol 1e-6, warm-started from the previous
    # evaluation's state) was noisy at 1e-7 with the warm start: L-BFGS-B's
    # line search then failed (ABNORMAL) on flat evidence surfaces
    lik = PairwiseProbitLikelihood()
    K, comp = _random_answers_on_a_periodic_kernel()
    cold, _ = laplace_evidence(K, comp, lik, tol=1e-6, form="precision")
    for shift in (-0.02, 0.01, 0.03, 0.1):
        K_near, _ = _random_answers_on_a_periodic_kernel(shift)
        _, near = laplace_evidence(K_near, comp, lik, tol=1e-6, form="precision")
        warm, _ = laplace_evidence(K, comp, lik, near, tol=1e-6, form="precision")
        torch.testing.assert_close(warm, cold, rtol=1e-10, atol=0)


def test_precision_form_evidence_is_accurate_when_k_is_ill_conditioned():
    # log|I + KW| as log|K⁻¹ + W| + log|K| cancels: with cond(K) ~ 1e9 (64
    # designs on a line, one answer) it was off by 3e-9, differently at
    # neighbouring hyperparameters, and L-BFGS-B's line search failed on it
    X = torch.linspace(-1.5, 2.5, 64, dtype=torch.float64).unsqueeze(-1)
    comp = torch.tensor([[13, 5]])
    lik = PairwiseProbitLikelihood()
    values = []
    for lengthscale in 0.52 + 1e-6 * torch.arange(5, dtype=torch.float64):
        K = _rbf(X, lengthscale, 0.005) + 1e-10 * torch.eye(64, dtype=torch.float64)
        L = torch.linalg.cholesky(K)
        precise = find_mode(L, comp, lik, form="precision")
        assert precise.form == "precision"
        whitened = find_mode(L, comp, lik, form="whitened")
        torch.testing.assert_close(
            precise.evidence, whitened.evidence, rtol=0, atol=1e-12
        )
        values.append(precise.evidence)
    # smooth: second differences at the level of rounding
    second = torch.stack(values).diff(n=2)
    assert second.abs().max().item() < 1e-12
