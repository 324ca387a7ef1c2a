"""``benchmarks/pbo_lapse.py``: a probit likelihood with a lapse rate."""

from __future__ import annotations

import math

import torch

from prefbo.models import PairwiseEPGP, PairwiseLaplaceGP


def test_lapse_zero_is_the_default_loop(variant_regrets):
    lapse, plain = variant_regrets("pbo_lapse", "lapse-ep-0")
    assert lapse == plain


def test_derivatives_match_finite_differences(load_benchmark):
    bench = load_benchmark("pbo_lapse")
    lik = bench.LapseProbitLikelihood(0.05)
    z = torch.linspace(-6.0, 4.0, 101, dtype=torch.float64)
    logp, d1, w, dw = lik._terms(z)
    p = 0.025 + 0.95 * torch.special.ndtr(z)
    assert torch.allclose(logp, p.log(), rtol=1e-12)
    h = 1e-4
    f = lik._log_prob
    assert torch.allclose(d1, (f(z + h) - f(z - h)) / (2 * h), atol=1e-7)
    curvature = -(f(z + h) - 2 * f(z) + f(z - h)) / h**2
    # clipped at zero where log p is convex (answers the model finds unlikely)
    assert bool((curvature[w == 0] <= 1e-5).all()) and bool((w == 0).any())
    inside = w > 1e-3
    assert torch.allclose(w[inside], curvature[inside], atol=1e-5)
    g = lambda t: lik._terms(t)[2]  # noqa: E731
    away = inside & (z > z[w == 0].max() + 0.5)
    assert torch.allclose(dw[away], ((g(z + h) - g(z - h)) / (2 * h))[away], atol=1e-6)


def _one_answer(model_class, lik):
    X = torch.tensor([[0.2], [0.7]], dtype=torch.float64)
    model = model_class(X, torch.tensor([[0, 1]]), likelihood=lik)
    model.eval()
    with torch.no_grad():
        post = model.posterior(X)
        mean = post.mean.reshape(-1)
        S = post.covariance_matrix.reshape(2, 2)
        K = model.covar_module(X).to_dense()
    var = float(S[0, 0] + S[1, 1] - 2 * S[0, 1])
    return float(mean[0] - mean[1]), float(K[0, 0] + K[1, 1] - 2 * K[0, 1]), var


def test_ep_reads_the_lapse_one_answer_closed_form(load_benchmark):
    # one answer: EP matches the tilted moments exactly; at m = 0, with
    # Z(m) = ε/2 + (1 - ε) Φ(m / √(s² + v)) and r = 2 (1 - ε) φ(0):
    # E[Δ] = v r / √(s² + v), Var[Δ] = v - v² r² / (s² + v)
    bench = load_benchmark("pbo_lapse")
    s = math.sqrt(2.0)
    for eps in (0.0, 0.05, 0.3):
        diff, v, var = _one_answer(PairwiseEPGP, bench.LapseProbitLikelihood(eps))
        r = 2 * (1 - eps) / math.sqrt(2 * math.pi)
        assert abs(diff - v * r / math.sqrt(s**2 + v)) < 1e-6 * diff
        assert abs(var - (v - v**2 * r**2 / (s**2 + v))) < 1e-6 * var


def test_laplace_mode_is_the_map(load_benchmark):
    # one answer: the mode Δ* of log p(Δ) - Δ²/(2v), found by bisection on
    # its slope written out
    bench = load_benchmark("pbo_lapse")
    s = math.sqrt(2.0)
    for eps in (0.0, 0.05, 0.3):
        diff, v, _ = _one_answer(PairwiseLaplaceGP, bench.LapseProbitLikelihood(eps))

        def slope(d, eps=eps, v=v):  # d/dΔ [log(ε/2 + (1 - ε) Φ(Δ/s)) - Δ²/(2v)]
            z = d / s
            p = eps / 2 + (1 - eps) * 0.5 * math.erfc(-z / math.sqrt(2))
            phi = math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
            return (1 - eps) * phi / p / s - d / v

        lo, hi = 0.0, 10.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if slope(mid) > 0 else (lo, mid)
        assert abs(diff - lo) < 1e-6 * max(1.0, lo)
