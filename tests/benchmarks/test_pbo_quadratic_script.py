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


def test_trend_kernel_keeps_the_defaults_priors_and_start(load_benchmark):
    from prefbo.kernels.defaults import default_preference_covar_module

    bench = load_benchmark("pbo_quadratic")
    trend = bench.trend_covar_module(3, 1.0, 16.0)
    default = default_preference_covar_module(3)
    rbf = trend.base_kernel.kernels[0]
    assert torch.equal(rbf.lengthscale, default.base_kernel.lengthscale)
    assert torch.equal(trend.outputscale, default.outputscale)
    ls_prior = rbf.lengthscale_prior
    default_ls = default.base_kernel.lengthscale_prior
    assert float(ls_prior.concentration) == float(default_ls.concentration)
    assert float(ls_prior.rate) == float(default_ls.rate)
    box, default_box = trend.outputscale_prior, default.outputscale_prior
    assert (float(box.a), float(box.b)) == (float(default_box.a), float(default_box.b))
    x = torch.rand(4, 3, dtype=torch.float64)
    with torch.no_grad():
        plain = default.to(torch.float64)(x).to_dense()
        summed = trend.to(torch.float64)(x).to_dense()
        quad = bench.QuadraticTrendKernel(1.0, 16.0)(x).to_dense()
    assert torch.allclose(summed, plain + trend.outputscale.double() * quad)
