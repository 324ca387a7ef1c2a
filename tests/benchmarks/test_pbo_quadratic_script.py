"""``benchmarks/pbo_quadratic.py``: a quadratic trend in the loop's kernel."""

from __future__ import annotations

import pytest
import torch


def test_zero_trend_is_the_default_loop(variant_regrets):
    # the same questions; the regrets agree to rounding (the sum kernel adds
    # a zero matrix through another evaluation path)
    trend, plain = variant_regrets("pbo_quadratic", "quadratic-trend-0")
    assert trend == pytest.approx(plain, rel=1e-6)


def test_trend_kernel_is_the_covariance_of_random_quadratics(load_benchmark):
    # utilities Σ_i (β_i x̃_i + γ_i x̃_i²), β ~ N(0, a), γ ~ N(0, b): their
    # sample covariance over many draws approaches the kernel
    bench = load_benchmark("pbo_quadratic")
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(5, 3, generator=gen, dtype=torch.float64)
    a, b = 1.0, 16.0
    kern = bench.QuadraticTrendKernel(a, b)
    K = kern(x, x).to_dense()
    n = 200_000
    beta = torch.randn(n, 3, generator=gen, dtype=torch.float64) * a**0.5
    gamma = torch.randn(n, 3, generator=gen, dtype=torch.float64) * b**0.5
    c = x - 0.5
    f = beta @ c.T + gamma @ (c * c).T  # n x 5
    emp = f.T @ f / n
    assert torch.allclose(K, emp, atol=0.03 * float(K.diagonal().max()))
    assert torch.allclose(kern(x, x, diag=True), K.diagonal())
