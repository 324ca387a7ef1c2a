"""``benchmarks/pbo_quadratic.py``: a quadratic trend in the loop's kernel."""

from __future__ import annotations

import pytest
import torch

from prefbo.acquisition import FastAnalyticEUBO


def test_zero_trend_is_the_default_model(load_benchmark):
    # after the same answers the zero trend's model is the default's (to
    # rounding: the sum kernel adds a zero matrix through another evaluation
    # path), and its next question is as good under the default's model. The
    # two questions need not be equal: the sum kernel takes the EUBO
    # maximiser's torch objective and the default its NumPy one, and
    # L-BFGS-B can part on the objectives' last bits.
    bench = load_benchmark("pbo_quadratic")
    pv = bench.pbo_variants
    loops = {}
    for name, kwargs in [
        ("trend", {"make_loop": pv.VARIANTS["quadratic-trend-0"]}),
        ("default", {}),
    ]:
        pv.pbo_regret.run_one(
            "Branin",
            0.1,
            0,
            name,
            answers=4,  # the random first pairs: the same answers
            trace=lambda k, loop, pair, w, name=name: loops.__setitem__(name, loop),
            **kwargs,
        )
    trend, default = loops["trend"].opt, loops["default"].opt
    X = trend.from_unit(
        torch.rand(
            64, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64
        )
    )
    for a, b in zip(trend.predict(X), default.predict(X), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    eubo = FastAnalyticEUBO(default.model)
    v_trend = eubo(default.to_unit(trend.ask()).unsqueeze(0)).item()
    v_default = eubo(default.to_unit(default.ask()).unsqueeze(0)).item()
    assert v_trend == pytest.approx(v_default, rel=1e-3)


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
    torch.testing.assert_close(
        rbf.lengthscale.double(), default.base_kernel.lengthscale
    )
    torch.testing.assert_close(trend.outputscale.double(), default.outputscale)
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
