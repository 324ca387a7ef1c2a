import math

import pytest
import torch
from scipy import optimize, special

from prefbo.inference import find_mode, jittered_cholesky, laplace_evidence
from prefbo.likelihoods import PairwiseLogitLikelihood, PairwiseProbitLikelihood
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


def test_jittered_cholesky_warns_and_factorises():
    X = torch.zeros(4, 1, dtype=torch.float64)  # identical rows: singular K
    K = _rbf(X, 1.0, 1.0)
    with pytest.warns(UserWarning, match="added jitter"):
        L = jittered_cholesky(K, name="K")
    assert torch.isfinite(L).all()
    with pytest.raises(RuntimeError, match="non-finite"):
        jittered_cholesky(K * float("nan"), name="K")


def test_sparse_laplacian_products_equal_dense(monkeypatch):
    # n above the dense threshold; a batch of 2 with a repeated pair and both
    # orientations of another, so the CSR assembly must sum duplicates
    import prefbo.inference.laplace as lap

    n = lap.DENSE_BELOW + 22
    X, comp, _ = make_pairwise_data(n, 3 * n, d=2, seed=11)
    comp = torch.stack([comp, comp.flip(0)])  # 2 x m x 2
    comp[0, 1] = comp[0, 0]
    comp[1, 2] = comp[1, 3].flip(-1)
    g = torch.Generator().manual_seed(0)
    omega = torch.rand(comp.shape[:-1], generator=g, dtype=torch.float64)
    M = torch.randn(2, n, 5, generator=g, dtype=torch.float64)
    dense = lap.comparison_laplacian(omega, comp, n)
    torch.testing.assert_close(
        lap.laplacian_matmul(omega, comp, M), dense @ M, rtol=1e-12, atol=1e-12
    )
    # the evidence gradient through the sparse path equals the dense path's
    K = _rbf(X, 0.4, 2.0) + 1e-6 * torch.eye(n, dtype=torch.float64)
    lik = PairwiseProbitLikelihood()
    grads = []
    for threshold in (lap.DENSE_BELOW, n + 1):  # sparse, then dense
        monkeypatch.setattr(lap, "DENSE_BELOW", threshold)
        Kr = K.clone().requires_grad_(True)
        ev, _ = laplace_evidence(Kr, comp[0], lik)
        ev.backward()
        grads.append(Kr.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n", [40, 140])  # dense and sparse paths
def test_laplacian_matmul_broadcasts_weights_comparisons_and_M(n):
    from prefbo.inference.laplace import comparison_laplacian, laplacian_matmul

    g = torch.Generator().manual_seed(1)
    m, B = 60, 3
    c1 = torch.randint(0, n, (m, 2), generator=g)
    cB = torch.randint(0, n, (B, m, 2), generator=g)
    w1 = torch.rand(m, generator=g, dtype=torch.float64)
    wB = torch.rand(B, m, generator=g, dtype=torch.float64)
    M1 = torch.randn(n, 4, generator=g, dtype=torch.float64)
    MB = torch.randn(B, n, 4, generator=g, dtype=torch.float64)
    for w, c, M in [
        (w1, c1, MB),  # M batched only
        (wB, c1, M1),  # weights batched only
        (w1, cB, M1),  # comparisons batched only
        (wB, cB, MB),
        (w1[:0], c1[:0], MB),  # no comparisons: W = 0
    ]:
        batch = torch.broadcast_shapes(w.shape[:-1], c.shape[:-2], M.shape[:-2])
        W = comparison_laplacian(
            w.expand(batch + w.shape[-1:]), c.expand(batch + c.shape[-2:]), n
        )
        torch.testing.assert_close(
            laplacian_matmul(w, c, M), W @ M, rtol=1e-12, atol=1e-12
        )


@pytest.mark.parametrize("n", [40, 140])  # dense and sparse paths
def test_comparison_cache_follows_in_place_changes(n):
    # the CSR pattern and the Laplacian index are cached per comparisons tensor;
    # an in-place edit (version bump), a view of another layout and a new
    # tensor at a reused address must all give the current W
    from prefbo.inference.laplace import comparison_laplacian, laplacian_matmul

    g = torch.Generator().manual_seed(2)
    m = 50
    comp = torch.randint(0, n, (m, 2), generator=g)
    w = torch.rand(m, generator=g, dtype=torch.float64)
    M = torch.randn(n, 3, generator=g, dtype=torch.float64)

    def dense(c: torch.Tensor, om: torch.Tensor) -> torch.Tensor:
        # independent of prefbo's assembly: a plain loop over the answers
        W = torch.zeros(n, n, dtype=torch.float64)
        for (i, j), o in zip(c.tolist(), om.tolist()):
            W[i, i] += o
            W[j, j] += o
            W[i, j] -= o
            W[j, i] -= o
        return W

    torch.testing.assert_close(laplacian_matmul(w, comp, M), dense(comp, w) @ M)
    comp[3] = comp[7].flip(-1)  # in place: same tensor, new version
    comp[5, 0] = (comp[5, 1] + 1) % n
    torch.testing.assert_close(laplacian_matmul(w, comp, M), dense(comp, w) @ M)
    torch.testing.assert_close(comparison_laplacian(w, comp, n), dense(comp, w))
    half = comp[::2]  # a strided view of the same storage
    torch.testing.assert_close(
        laplacian_matmul(w[::2], half, M), dense(half, w[::2]) @ M
    )
    for seed in range(3):  # fresh tensors (addresses may be reused)
        c = torch.randint(0, n, (m, 2), generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(laplacian_matmul(w, c, M), dense(c, w) @ M)
    # edits the version counter does not see: .data assignment (same object,
    # new storage, possibly at a reused address) and writes through NumPy
    for seed in range(5):
        comp.data = torch.randint(
            0, n, (m, 2), generator=torch.Generator().manual_seed(9 + seed)
        )
        torch.testing.assert_close(laplacian_matmul(w, comp, M), dense(comp, w) @ M)
    comp.numpy()[2] = (comp[2] + 1).numpy() % n
    torch.testing.assert_close(laplacian_matmul(w, comp, M), dense(comp, w) @ M)
    with torch.inference_mode():  # no version counter: computed, not cached
        c = torch.randint(0, n, (m, 2), generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(laplacian_matmul(w, c, M), dense(c, w) @ M)


def test_warm_start_after_new_answers_on_the_same_designs():
    # the previous state has fewer comparisons than the data now: its
    # curvature cannot seed the first-order prediction (it used to crash)
    from prefbo.models import PairwiseLaplaceGP

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
