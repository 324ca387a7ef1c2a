import pytest
import torch

from prefbo.inference import find_mode, laplace_evidence
from prefbo.inference.laplace import default_tol
from prefbo.inference.newton import newton_mode
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.utils.testing import make_pairwise_data, random_answers


def _rbf(X, lengthscale, outputscale):
    return outputscale * torch.exp(-torch.cdist(X, X).pow(2) / (2 * lengthscale**2))


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


@pytest.mark.parametrize("precision", [True, False])
def test_newton_mode_is_the_run_find_mode_makes_in_its_form(precision):
    X, comp, _ = make_pairwise_data(20, 50, seed=2)
    L = torch.linalg.cholesky(
        _rbf(X, 0.5, 2.0) + 1e-6 * torch.eye(20, dtype=torch.float64)
    )
    lik = PairwiseProbitLikelihood()
    tol = default_tol(torch.float64)
    state = newton_mode(L, comp, lik, None, 100, tol, 10, None, precision)
    form = "precision" if precision else "whitened"
    expected = find_mode(L, comp, lik, form=form)
    assert state.form == expected.form == form
    assert torch.equal(state.mode, expected.mode)
    assert torch.equal(state.evidence, expected.evidence)
