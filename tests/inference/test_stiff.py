import pytest
import torch

from prefbo.inference.stiff import is_stiff, stiff_projector, stiff_solve, stiffness

DT = torch.float64


def _problem(n=8):
    x = torch.linspace(0, 1, n, dtype=DT).unsqueeze(-1)
    K = torch.exp(-0.5 * (x - x.T) ** 2 / 0.3**2) + 1e-6 * torch.eye(n, dtype=DT)
    comps = torch.tensor([[i, i + 1] for i in range(n - 1)])
    return K, torch.linalg.cholesky(K), comps


def _laplacian(omega, comps, n):
    D = torch.zeros(comps.shape[0], n, dtype=DT)
    D[torch.arange(comps.shape[0]), comps[:, 0]] = 1.0
    D[torch.arange(comps.shape[0]), comps[:, 1]] = -1.0
    return D, D.T @ torch.diag(omega) @ D


def test_projector_agrees_with_the_formed_system_at_moderate_curvature():
    K, L, comps = _problem()
    omega = torch.linspace(0.5, 3.0, comps.shape[0], dtype=DT)
    _, W = _laplacian(omega, comps, K.shape[0])
    A = torch.eye(K.shape[0], dtype=DT) + L.T @ W @ L
    P, logdet, factors = stiff_projector(L, omega, comps)
    eye = torch.eye(K.shape[0], dtype=DT)
    assert torch.allclose(eye - P, torch.linalg.inv(A), atol=1e-12)
    assert torch.allclose(logdet, torch.linalg.slogdet(A)[1], atol=1e-10)
    gamma = torch.randn(comps.shape[0], dtype=DT)
    v = torch.randn(K.shape[0], dtype=DT)
    D, _ = _laplacian(omega, comps, K.shape[0])
    expected = torch.linalg.solve(A, L.T @ D.T @ gamma - v)
    assert torch.allclose(stiff_solve(P, factors, gamma, v), expected, atol=1e-10)


@pytest.mark.parametrize("omega", [1e8, 1e16, 1e24, 1e40])
def test_covariance_is_exact_for_stiff_curvature(omega):
    # Woodbury with M = Ω⁻¹ + D K Dᵀ (a chain: D has full row rank, so M is
    # well conditioned) is an independent, accurate form of (K⁻¹ + W)⁻¹
    K, L, comps = _problem()
    n, m = K.shape[0], comps.shape[0]
    om = torch.full((m,), omega, dtype=DT)
    D, _ = _laplacian(om, comps, n)
    M = torch.diag(1.0 / om) + D @ K @ D.T
    exact = K - K @ D.T @ torch.linalg.solve(M, D @ K)
    P, logdet, _ = stiff_projector(L, om, comps)
    sigma = L @ (torch.eye(n, dtype=DT) - P) @ L.T
    assert torch.allclose(sigma, exact, atol=1e-12)
    # the limit: f conditioned on all differences 0, i.e. 1 1ᵀ / (1ᵀ K⁻¹ 1)
    one = torch.ones(n, 1, dtype=DT)
    limit = 1.0 / (one.T @ torch.linalg.solve(K, one))
    assert torch.allclose(sigma.diagonal(), limit.reshape(()).expand(n), rtol=1e-6)
    evals = torch.linalg.eigvalsh(P)
    assert evals.min() > -1e-12 and evals.max() < 1 + 1e-12
    assert torch.isfinite(logdet)


def test_contradicting_pairs_make_no_spurious_information():
    # [0, 1] and [1, 0] with huge ω: D has dependent rows, M is singular in
    # the limit; the covariance must still be K conditioned on f0 = f1
    K, L, _ = _problem(2)
    comps = torch.tensor([[0, 1], [1, 0]])
    d = torch.tensor([[1.0, -1.0]], dtype=DT)
    exact = K - K @ d.T @ d @ K / (d @ K @ d.T)
    for omega in (1e10, 1e20, 1e30):
        om = torch.full((2,), omega, dtype=DT)
        P, _, _ = stiff_projector(L, om, comps)
        sigma = L @ (torch.eye(2, dtype=DT) - P) @ L.T
        assert torch.allclose(sigma, exact, atol=1e-10)


def test_stiffness_test():
    K, L, comps = _problem()
    diag = K.diagonal()
    small = torch.ones(comps.shape[0], dtype=DT)
    assert not is_stiff(small, comps, diag)
    assert is_stiff(small * 1e7, comps, diag)
    assert torch.allclose(stiffness(small, comps, diag), 2 * diag.max())
    empty = torch.zeros(0, dtype=DT)
    assert float(stiffness(empty, comps[:0], diag)) == 0.0


@pytest.mark.parametrize("omega", [1e8, 1e20, 1e40])
def test_log_det_beyond_the_cap(omega):
    # independent comparisons (a chain): det A = det Ω det(Ω⁻¹ + H Hᵀ);
    # a contradicting pair: det A = 1 + (ω1 + ω2) |h|² (one direction)
    K, L, comps = _problem()
    m = comps.shape[0]
    om = torch.full((m,), omega, dtype=DT)
    D, _ = _laplacian(om, comps, K.shape[0])
    M = torch.diag(1.0 / om) + D @ K @ D.T
    expected = om.log().sum() + torch.linalg.slogdet(M)[1]
    _, logdet, _ = stiff_projector(L, om, comps)
    torch.testing.assert_close(logdet, expected, rtol=1e-10, atol=1e-8)
    K2, L2, _ = _problem(2)
    pair = torch.tensor([[0, 1], [1, 0]])
    h2 = K2[0, 0] + K2[1, 1] - 2 * K2[0, 1]
    _, logdet2, _ = stiff_projector(L2, torch.full((2,), omega, dtype=DT), pair)
    torch.testing.assert_close(
        logdet2, (1 + 2 * omega * h2).log(), rtol=1e-8, atol=1e-8
    )


@pytest.mark.parametrize("omega", [1e3, 1e12, 1e20])
def test_pair_variances_are_accurate_where_tiny(omega):
    # q_k = d_kᵀ (K⁻¹ + W)⁻¹ d_k ~ 1/ω: against 50-digit arithmetic
    mpmath = pytest.importorskip("mpmath")
    K, L, comps = _problem(5)
    comps = torch.cat([comps, torch.tensor([[1, 0], [0, 2]])])
    m = comps.shape[0]
    om = torch.full((m,), omega, dtype=DT)
    om[-1] = 0.5  # one soft comparison
    _, _, factors = stiff_projector(L, om, comps)
    with mpmath.workdps(50):
        Lm = mpmath.matrix(L.tolist())
        Km = Lm * Lm.T
        Wm = mpmath.zeros(5, 5)
        for (w, l), o in zip(comps.tolist(), om.tolist()):
            Wm[w, w] += o
            Wm[l, l] += o
            Wm[w, l] -= o
            Wm[l, w] -= o
        S = (Km**-1 + Wm) ** -1
        exact = [float(S[w, w] + S[l, l] - 2 * S[w, l]) for w, l in comps.tolist()]
    exact = torch.tensor(exact, dtype=DT)
    # stiff comparisons: relative accuracy; the soft one (whose difference
    # the stiff ones pin too): absolute accuracy of the order of ε |h|²
    torch.testing.assert_close(factors[3][:-1], exact[:-1], rtol=1e-7, atol=0.0)
    torch.testing.assert_close(factors[3][-1:], exact[-1:], rtol=0.0, atol=1e-14)


@pytest.mark.parametrize("batch", [(3,), (2, 3)])
def test_a_batch_equals_its_elements_one_by_one(batch):
    # m = 7 comparisons, n = 8 designs, batch sizes other than n and m
    K, L, comps = _problem()
    g = torch.Generator().manual_seed(0)
    omega = 10.0 ** (12 * torch.rand(batch + (comps.shape[0],), generator=g, dtype=DT))
    Lb = L.expand(batch + L.shape)
    P, logdet, factors = stiff_projector(Lb, omega, comps)
    gamma = torch.randn(batch + (comps.shape[0],), generator=g, dtype=DT)
    v = torch.randn(batch + (K.shape[0],), generator=g, dtype=DT)
    solved = stiff_solve(P, factors, gamma, v)
    for idx in torch.cartesian_prod(*(torch.arange(b) for b in batch)).reshape(
        -1, len(batch)
    ):
        i = tuple(idx.tolist())
        P1, logdet1, f1 = stiff_projector(L, omega[i], comps)
        torch.testing.assert_close(P[i], P1)
        torch.testing.assert_close(logdet[i], logdet1)
        torch.testing.assert_close(factors[3][i], f1[3])  # pair variances
        torch.testing.assert_close(factors[4][i], f1[4])  # cavity precisions
        torch.testing.assert_close(solved[i], stiff_solve(P1, f1, gamma[i], v[i]))
