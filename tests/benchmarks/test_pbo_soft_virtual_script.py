"""``benchmarks/pbo_soft_virtual.py``: virtual comparisons at their own scale."""

from __future__ import annotations

import math

import torch


def test_factor_one_is_the_default_loop(load_benchmark):
    bench = load_benchmark("pbo_soft_virtual")
    soft = bench.pbo_regret.run_one(
        "Branin",
        0.1,
        0,
        "soft-virtual-1",
        answers=8,
        make_loop=bench.pbo_variants.VARIANTS["soft-virtual-1"],
    )
    plain = bench.pbo_regret.run_one("Branin", 0.1, 0, "default", answers=8)
    assert soft["regret"] == plain["regret"]


def test_one_comparison_at_its_own_scale_matches_the_closed_form(load_benchmark):
    # one answer "0 beats 1" at probit scale k·s: the posterior mean of the
    # difference is v φ(0) / (Φ(0) √(k²s² + v)), v its prior variance (EP is
    # exact for one answer)
    bench = load_benchmark("pbo_soft_virtual")
    X = torch.tensor([[0.2], [0.7]], dtype=torch.float64)
    comps = torch.tensor([[0, 1]])
    for k in (0.3, 1.0, 3.0):
        lik = bench.SoftProbit(torch.tensor([k], dtype=torch.float64))
        model = bench.SoftEPGP(X, comps, likelihood=lik)
        model.eval()
        with torch.no_grad():
            post = model.posterior(X)
            K = model.covar_module(X).to_dense()
        mean = post.mean.reshape(-1)
        v = float(K[0, 0] + K[1, 1] - 2 * K[0, 1])
        s = math.sqrt(2.0)
        phi0 = 1.0 / math.sqrt(2 * math.pi)
        expected = v * phi0 / (0.5 * math.sqrt(k**2 * s**2 + v))
        assert abs(float(mean[0] - mean[1]) - expected) < 1e-6 * expected
        assert lik.scale == s  # predictions read the person's scale
