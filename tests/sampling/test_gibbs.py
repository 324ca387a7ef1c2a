"""Gibbs sampler: exact 1-D truncated normals, moments, agreement with LinESS.

The Monte Carlo tolerances follow ``test_lin_ess.py`` (z-scores against the
spread of per-chain estimates, ``|z| <= 4.5``, with an asserted floor on the
effective sample size this implies); its references and helpers are loaded
from that file. Draws of the 1-D samplers are independent, so their SE is the
plain ``sd / sqrt(N)``.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import mpmath
import pytest
import torch
from scipy.special import ndtri_exp as scipy_ndtri_exp

from prefbo.sampling import (
    GibbsSampler,
    LinESS,
    ndtri_exp,
    sample_standard_normal_below,
    sample_truncated_standard_normal,
)
from prefbo.utils.testing import tolerance


def _load_sibling(name: str):
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_prefbo_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


_lin = _load_sibling("test_lin_ess")
Z_MAX = _lin.Z_MAX
chain_z, assert_feasible = _lin.chain_z, _lin.assert_feasible

mpmath.mp.dps = 50


# --------------------------------------------------- 1-D truncated normals


def test_ndtri_exp_matches_scipy_from_near_zero_to_far_tail(tkwargs):
    log_p = -torch.cat([torch.logspace(-30, 0.5, 40), torch.logspace(0.5, 6, 40)])
    log_p = log_p.to(**tkwargs)
    x = ndtri_exp(log_p)
    ref = torch.as_tensor(scipy_ndtri_exp(log_p.double().cpu().numpy()))
    rtol = tolerance(tkwargs["dtype"], 1e-11, 1e-6)
    torch.testing.assert_close(x.cpu().double(), ref, rtol=rtol, atol=0.0)


def _reference_moments(a: float, b: float) -> tuple[float, float]:
    """Mean and variance of N(0, 1) on [a, b], with 50-digit arithmetic."""
    if a + b > 0:  # reflect into the lower tail, where ncdf keeps its digits
        mean, var = _reference_moments(-b, -a)
        return -mean, var
    a_, b_ = mpmath.mpf(a), mpmath.mpf(b)
    mass = mpmath.ncdf(b_) - mpmath.ncdf(a_)

    def edge(t):  # (φ(t), t φ(t)), zero at ±inf
        return (0, 0) if mpmath.isinf(t) else (mpmath.npdf(t), t * mpmath.npdf(t))

    (pa, tpa), (pb, tpb) = edge(a_), edge(b_)
    mean = (pa - pb) / mass
    second = 1 + (tpa - tpb) / mass
    return float(mean), float(second - mean**2)


INTERVALS = [
    (40.0, 41.0),
    (-41.0, -40.0),
    (-math.inf, -30.0),
    (5.0, math.inf),
    (-1e-8, 1e-8),
    (-math.inf, math.inf),
    (-3.0, 2.0),
    (0.5, 0.50001),
    (-1e3, -999.0),
    (8.0, 9.0),
]


def _check_iid_moments(x, lo, hi, n):
    mean, var = _reference_moments(lo, hi)
    assert bool(((x >= lo) & (x <= hi)).all())
    sd = math.sqrt(var)
    x = x.double().cpu()
    assert abs(x.mean().item() - mean) < Z_MAX * sd / math.sqrt(n) + 1e-12 * abs(mean)
    # variance: SE of the sample variance is var * sqrt((kurtosis - 1) / n) and
    # a truncated normal's kurtosis is at most 3
    assert abs(x.var().item() - var) < Z_MAX * var * math.sqrt(2 / n) + 1e-6 * var


@pytest.mark.parametrize("interval", INTERVALS, ids=str)
def test_truncated_standard_normal_moments_in_tails_and_narrow_intervals(
    tkwargs, interval
):
    lo, hi = interval
    n = 20_000
    g = torch.Generator(device=tkwargs["device"]).manual_seed(0)
    u = torch.rand(n, generator=g, **tkwargs).clamp_min(1e-7)
    full = torch.full((n,), 1.0, **tkwargs)
    x = sample_truncated_standard_normal(lo * full, hi * full, u)
    _check_iid_moments(x, lo, hi, n)


@pytest.mark.parametrize("upper", [-40.0, -5.0, 0.0, 3.0, 40.0])
def test_standard_normal_below_moments(tkwargs, upper):
    n = 20_000
    g = torch.Generator(device=tkwargs["device"]).manual_seed(1)
    u = torch.rand(n, generator=g, **tkwargs).clamp_min(1e-7)
    x = sample_standard_normal_below(torch.full((n,), upper, **tkwargs), u.log())
    _check_iid_moments(x, -math.inf, upper, n)


# ------------------------------------------------ Gibbs: known moments


@pytest.mark.parametrize(
    "A, b",
    [
        ([[-1.0]], [0.0]),
        ([[-1.0]], [-1.0]),
        ([[1.0]], [0.5]),
        ([[1.0], [-1.0]], [0.5, 1.0]),
    ],
    ids=["half-normal", "above-1", "below-0.5", "interval"],
)
def test_gibbs_1d_moments(tkwargs, A, b):
    sd = 2.0
    A, b = torch.tensor(A, **tkwargs), torch.tensor(b, **tkwargs)
    cov = torch.full((1, 1), sd**2, **tkwargs)
    sampler = GibbsSampler(A, b, covariance_matrix=cov, num_chains=64, burnin=5, seed=1)
    draws = sampler.draw(300)  # conditionals are the target: draws are iid
    lo = max(
        [-math.inf] + [bj / aj for (aj,), bj in zip(A.tolist(), b.tolist()) if aj < 0]
    )
    hi = min(
        [math.inf] + [bj / aj for (aj,), bj in zip(A.tolist(), b.tolist()) if aj > 0]
    )
    mean, var = _reference_moments(lo / sd, hi / sd)
    mean, var = sd * mean, sd**2 * var
    z_mean, ess = chain_z(draws, lambda x: x, mean)
    z_var, _ = chain_z(draws, lambda x: (x - mean) ** 2, var)
    assert float(z_mean.max()) < Z_MAX and float(z_var.max()) < Z_MAX
    assert float(ess.min()) > 6_000  # of 19,200 independent draws (seeded: 14,000+)
    assert_feasible(draws, A, b)


@pytest.mark.parametrize(
    "mean, sds, rho",
    [((0.0, 0.0), (1.0, 1.0), -0.5), ((0.3, -0.2), (1.0, 2.0), 0.6)],
    ids=["cone", "shifted"],
)
def test_gibbs_bivariate_orthant_moments(tkwargs, mean, sds, rho):
    _, ref_mean, ref_var = _lin._orthant_reference(mean, sds, rho)
    cov = torch.tensor(
        [[sds[0] ** 2, rho * sds[0] * sds[1]], [rho * sds[0] * sds[1], sds[1] ** 2]],
        **tkwargs,
    )
    A, b = -torch.eye(2, **tkwargs), torch.zeros(2, **tkwargs)
    sampler = GibbsSampler(
        A, b, torch.tensor(mean, **tkwargs), cov, num_chains=64, burnin=20, seed=2
    )
    draws = sampler.draw(300)
    z_mean, ess = chain_z(draws, lambda x: x, ref_mean)
    z_var, _ = chain_z(draws, lambda x: (x - ref_mean) ** 2, ref_var)
    assert float(z_mean.max()) < Z_MAX and float(z_var.max()) < Z_MAX
    assert float(ess.min()) > 5_000  # of 19,200 draws (seeded runs: 14,000+)
    assert_feasible(draws, A, b)


@pytest.mark.parametrize("kind", ["box", "polytope"])
def test_gibbs_10d_moments_match_rejection_sampling(tkwargs, kind):
    _, ref_mean, ref_var, se_mean, se_var = _lin._rejection_reference(kind)
    mean, cov, A, b = (t.to(**tkwargs) for t in _lin._polytope(kind))
    sampler = GibbsSampler(A, b, mean, cov, num_chains=64, burnin=20, seed=5)
    draws = sampler.draw(150)
    z_mean, ess = chain_z(draws, lambda x: x, ref_mean, se_mean)
    z_var, _ = chain_z(draws, lambda x: (x - ref_mean) ** 2, ref_var, se_var)
    assert float(z_mean.max()) < Z_MAX and float(z_var.max()) < Z_MAX
    assert float(ess.min()) > 1_800  # of 9,600 draws (seeded runs: 5,400+)
    assert_feasible(draws, A, b)


def test_gibbs_consistent_ranking_moments_match_rejection_sampling(tkwargs):
    _, ref_mean, ref_var, se_mean, se_var = _lin._ranking_reference()
    K, A, b = (t.to(**tkwargs) for t in _lin._ranking_problem())
    sampler = GibbsSampler(A, b, covariance_matrix=K, num_chains=64, burnin=20, seed=9)
    draws = sampler.draw(400)
    z_mean, ess = chain_z(draws, lambda x: x, ref_mean, se_mean)
    z_var, _ = chain_z(draws, lambda x: (x - ref_mean) ** 2, ref_var, se_var)
    assert float(z_mean.max()) < Z_MAX and float(z_var.max()) < Z_MAX
    # neighbouring utilities pin each coordinate: Gibbs mixes slowly here
    assert float(ess.min()) > 180  # of 25,600 draws (seeded runs: 470+)
    assert bool((draws.diff(dim=-1) < 0).all())


def test_gibbs_agrees_with_lin_ess_on_a_skew_gp_orthant(tkwargs64):
    cov = _lin._skew_target(20, **tkwargs64)
    A, b = -torch.eye(20, **tkwargs64), torch.zeros(20, **tkwargs64)
    kw = {"covariance_matrix": cov, "num_chains": 64, "seed": 3}
    gibbs = GibbsSampler(A, b, burnin=20, **kw).draw(100)
    ess = LinESS(A, b, burnin=300, thinning=4, **kw).draw(300)
    for stat in (lambda x: x, lambda x: x * x):
        values = [stat(x.cpu()).mean(0) for x in (gibbs, ess)]  # 64 x 20 each
        se = torch.sqrt(sum(v.var(0) / 64 for v in values))
        z = (values[0].mean(0) - values[1].mean(0)) / se
        assert float(z.abs().max()) < Z_MAX
    assert bool((gibbs > 0).all()) and bool((ess > 0).all())


def test_gibbs_far_tail_conditional_stays_finite(tkwargs):
    # N(0, 1) restricted to x >= 30: every conditional is deep in the tail
    A, b = -torch.ones(1, 1, **tkwargs), torch.full((1,), -30.0, **tkwargs)
    draws = GibbsSampler(A, b, num_chains=64, seed=0).draw(50)
    assert bool(torch.isfinite(draws).all()) and bool((draws >= 30).all())
    mean, _ = _reference_moments(30.0, math.inf)
    assert draws.double().mean().item() == pytest.approx(mean, abs=2e-3)


def test_gibbs_seed_reproducibility_and_thinning(tkwargs):
    cov = _lin._skew_target(6, **tkwargs)
    A, b = -torch.eye(6, **tkwargs), torch.zeros(6, **tkwargs)

    def make(**kw):
        return GibbsSampler(A, b, covariance_matrix=cov, num_chains=4, burnin=3, **kw)

    torch.testing.assert_close(make(seed=3).draw(5), make(seed=3).draw(5))
    assert not torch.equal(make(seed=3).draw(5), make(seed=4).draw(5))
    torch.testing.assert_close(
        make(seed=3, thinning=1).draw(4), make(seed=3).draw(8)[1::2]
    )
    assert make(seed=3, thinning=1).lifetime_steps == 3
