"""LinESS: exact arcs, moments against known answers, agreement with BoTorch.

Monte Carlo tolerances: every moment is checked as a z-score,
``|estimate - reference| / SE <= 4.5``, where ``SE`` is the spread of the
per-chain estimates over ``sqrt(num_chains)`` (64 chains started together and
burnt in, so they are close to independent replicates), combined with the
reference's own SE where the reference is itself Monte Carlo. The effective
sample size this implies, ``var / SE²``, is asserted to be at least a stated
floor (about a third of what the seeded runs give), so a tolerance cannot be
loose because a chain stopped moving.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch
from scipy.integrate import dblquad
from scipy.stats import multivariate_normal

from prefbo.sampling import LinESS
from prefbo.sampling.lin_ess import cone_angle, union_angle
from prefbo.utils.testing import tolerance

Z_MAX = 4.5


def chain_z(draws, stat, reference, reference_se=0.0):
    """z-scores and implied ESS of the chain-pooled mean of ``stat(draws)``.

    ``draws`` is ``n x C x d``; ``stat`` maps it elementwise.
    """
    values = stat(draws.detach().cpu().double())  # n x C x d
    per_chain = values.mean(0)  # C x d
    se = per_chain.std(0) / math.sqrt(per_chain.shape[0])
    z = (per_chain.mean(0) - reference) / torch.sqrt(se**2 + reference_se**2)
    ess = values.flatten(0, 1).var(0) / se**2
    return z.abs(), ess


def assert_feasible(draws, A, b):
    """Every draw satisfies every constraint, up to rounding of ``A x``."""
    x = draws.flatten(0, 1).double()
    excess = x @ A.double().mT - b.double()
    scale = x.abs() @ A.double().abs().mT + b.double().abs() + 1.0
    tol = tolerance(draws.dtype, 1e-12, 1e-5)
    assert bool((excess <= tol * scale).all()), f"max violation {excess.max()}"


# --------------------------------------------------------------- exact arcs


def _grid_feasible(p, q, b, theta):
    """``batch x G`` feasibility of angles ``theta`` (``G``) by brute force."""
    vals = p[..., None] * theta.cos() + q[..., None] * theta.sin()  # B x k x G
    return (vals <= b[:, None]).all(-2)


@pytest.mark.parametrize("cone", [False, True])
def test_angles_are_uniform_on_the_feasible_set(cone):
    g = torch.Generator().manual_seed(0)
    B, k, G = 30, 6, 100_000
    q = torch.randn(B, k, generator=g, dtype=torch.float64)
    b = torch.zeros(k, dtype=torch.float64) if cone else torch.rand(k, generator=g)
    b = b.double()
    p = b - torch.rand(B, k, generator=g, dtype=torch.float64) * 1.5  # p <= b
    grid = torch.linspace(0, 2 * math.pi, G + 1, dtype=torch.float64)[:-1]
    ok = _grid_feasible(p, q, b, grid)  # B x G
    N = 2000
    u = ((torch.arange(N, dtype=torch.float64) + 0.5) / N).expand(B, N).mT
    if cone:
        theta = cone_angle(-p.expand(N, B, k), q.expand(N, B, k), u, 1e-12)
    else:
        theta = union_angle(p.expand(N, B, k), q.expand(N, B, k), b, u, 1e-12)
    theta = theta.mT.remainder(2 * math.pi)  # B x N
    vals = p[..., None] * theta[:, None].cos() + q[..., None] * theta[:, None].sin()
    assert bool((vals <= b[:, None] + 1e-12).all())
    # uniform on the feasible set: the share of angles in [0, t) equals the
    # feasible length in [0, t) over the total, for every t on the grid
    cdf_grid = ok.double().cumsum(-1) / ok.double().sum(-1, keepdim=True)  # B x G
    cell = (theta / (2 * math.pi) * G).long().clamp(max=G - 1)  # B x N
    counts = torch.zeros(B, G, dtype=torch.float64).scatter_add_(
        1, cell, torch.ones_like(theta)
    )
    cdf_draws = counts.cumsum(-1) / N
    tol = 1.0 / N + 2.0 / ok.sum(-1)  # B: resolution of draws and of the grid
    assert bool(((cdf_draws - cdf_grid).abs().amax(-1) < tol).all())
    if not cone:  # the union logic was exercised: some circles have 2+ arcs
        pieces = (ok.diff(dim=-1).int() == 1).sum(-1) + ok[:, 0].int()
        assert int((pieces >= 2).sum()) >= 3


def test_angle_of_a_point_on_or_just_outside_the_boundary_is_feasible():
    p = torch.tensor([[0.0, -1.0], [1e-17, -1.0], [-1e-300, -2.0]], dtype=torch.float64)
    q = torch.tensor([[1.0, 0.5], [-1.0, 0.3], [0.0, 1.0]], dtype=torch.float64)
    u = torch.tensor([0.3, 0.7, 0.5], dtype=torch.float64)
    for theta in (
        cone_angle(-p, q, u, 1e-12),
        union_angle(p, q, torch.zeros(2, dtype=torch.float64), u, 1e-12),
    ):
        assert bool(torch.isfinite(theta).all())
        vals = p * theta[:, None].cos() + q * theta[:, None].sin()
        assert bool((vals <= 1e-15).all())


# --------------------------------------------------- moments, known answers


def _normal_above(lower: float, sd: float) -> tuple[float, float]:
    """Mean and variance of N(0, sd²) restricted to x >= lower."""
    a = lower / sd
    lam = (
        math.exp(-0.5 * a * a) / math.sqrt(2 * math.pi) / (0.5 * math.erfc(a / 2**0.5))
    )
    return sd * lam, sd**2 * (1 + a * lam - lam**2)


@pytest.mark.parametrize("lower", [0.0, 1.0, -0.5])  # 0: half normal (cone path)
def test_truncated_normal_1d_moments(tkwargs, lower):
    sd = 2.0
    A, b = -torch.ones(1, 1, **tkwargs), torch.full((1,), -lower, **tkwargs)
    cov = torch.full((1, 1), sd**2, **tkwargs)
    sampler = LinESS(A, b, covariance_matrix=cov, num_chains=64, burnin=30, seed=1)
    draws = sampler.draw(400)  # 400 x 64 x 1
    mean, var = _normal_above(lower, sd)
    if lower == 0.0:  # the textbook half normal
        assert mean == pytest.approx(sd * math.sqrt(2 / math.pi))
        assert var == pytest.approx((1 - 2 / math.pi) * sd**2)
    z_mean, ess = chain_z(draws, lambda x: x, mean)
    z_var, _ = chain_z(draws, lambda x: (x - mean) ** 2, var)
    assert float(z_mean.max()) < Z_MAX and float(z_var.max()) < Z_MAX
    assert float(ess.min()) > 3_000  # of 25,600 draws (seeded runs: 8,600+)
    assert_feasible(draws, A, b)


@functools.lru_cache
def _orthant_reference(mean, sds, rho):
    """P(x > 0), E[x | x > 0], Var[x | x > 0] of a bivariate normal by quadrature."""
    cov = [[sds[0] ** 2, rho * sds[0] * sds[1]], [rho * sds[0] * sds[1], sds[1] ** 2]]
    pdf = multivariate_normal(mean, cov).pdf

    def integral(f):
        return dblquad(lambda y, x: f(x, y) * pdf([x, y]), 0, 12, 0, 12)[0]

    prob = integral(lambda x, y: 1.0)
    m = [integral(lambda x, y: x) / prob, integral(lambda x, y: y) / prob]
    v = [
        integral(lambda x, y: (x - m[0]) ** 2) / prob,
        integral(lambda x, y: (y - m[1]) ** 2) / prob,
    ]
    return prob, torch.tensor(m).double(), torch.tensor(v).double()


@pytest.mark.parametrize(
    "mean, sds, rho",
    [((0.0, 0.0), (1.0, 1.0), -0.5), ((0.3, -0.2), (1.0, 2.0), 0.6)],
    ids=["cone", "shifted"],
)
def test_bivariate_orthant_moments(tkwargs, mean, sds, rho):
    prob, ref_mean, ref_var = _orthant_reference(mean, sds, rho)
    if mean == (0.0, 0.0):  # closed forms check the quadrature itself
        assert prob == pytest.approx(0.25 + math.asin(rho) / (2 * math.pi), rel=1e-6)
        closed = (1 + rho) / (2 * math.sqrt(2 * math.pi) * prob)
        torch.testing.assert_close(ref_mean, torch.tensor(sds).double() * closed)
    cov = torch.tensor(
        [[sds[0] ** 2, rho * sds[0] * sds[1]], [rho * sds[0] * sds[1], sds[1] ** 2]],
        **tkwargs,
    )
    A, b = -torch.eye(2, **tkwargs), torch.zeros(2, **tkwargs)
    sampler = LinESS(
        A, b, torch.tensor(mean, **tkwargs), cov, num_chains=64, burnin=50, seed=2
    )
    draws = sampler.draw(500)
    z_mean, ess = chain_z(draws, lambda x: x, ref_mean)
    z_var, _ = chain_z(draws, lambda x: (x - ref_mean) ** 2, ref_var)
    assert float(z_mean.max()) < Z_MAX and float(z_var.max()) < Z_MAX
    assert float(ess.min()) > 2_000  # of 32,000 draws (seeded runs: 6,100+)
    assert_feasible(draws, A, b)


def _polytope(kind: str, d: int = 10):
    """A 10-D correlated Gaussian and a box (axis-aligned) or box + 2 oblique cuts."""
    g = torch.Generator().manual_seed(3)
    B = torch.randn(d, d, generator=g, dtype=torch.float64)
    cov = 0.3 * (B @ B.mT / d + 0.5 * torch.eye(d, dtype=torch.float64))
    mean = 0.2 * torch.randn(d, generator=g, dtype=torch.float64)
    eye = torch.eye(d, dtype=torch.float64)
    A = torch.cat([eye, -eye])
    b = torch.cat([torch.full((d,), 1.0), torch.full((d,), 0.8)]).double()
    if kind == "polytope":
        cuts = torch.zeros(2, d, dtype=torch.float64)
        cuts[0], cuts[1, 0], cuts[1, 1] = 1.0, 1.0, -1.0
        A, b = torch.cat([A, cuts]), torch.cat([b, torch.tensor([2.5, 0.8]).double()])
    return mean, cov, A, b


@functools.lru_cache
def _rejection_reference(kind: str):
    """Mean, var and their SEs from accepted draws of the untruncated Gaussian."""
    mean, cov, A, b = _polytope(kind)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(800_000, 10, generator=g, dtype=torch.float64)
    x = x @ torch.linalg.cholesky(cov).mT + mean
    x = x[(x @ A.mT <= b).all(-1)]  # acceptance 11% (polytope), 13% (box)
    m, v = x.mean(0), x.var(0)
    se_v = ((x - m) ** 2).std(0) / math.sqrt(len(x))
    return len(x), m, v, v.sqrt() / math.sqrt(len(x)), se_v


@pytest.mark.parametrize("kind", ["box", "polytope"])
def test_10d_moments_match_rejection_sampling(tkwargs, kind):
    accepted, ref_mean, ref_var, se_mean, se_var = _rejection_reference(kind)
    assert accepted > 80_000
    mean, cov, A, b = (t.to(**tkwargs) for t in _polytope(kind))
    sampler = LinESS(A, b, mean, cov, num_chains=64, burnin=100, seed=5)
    assert sampler._axis_aligned == (kind == "box")
    draws = sampler.draw(600)
    z_mean, ess = chain_z(draws, lambda x: x, ref_mean, se_mean)
    z_var, _ = chain_z(draws, lambda x: (x - ref_mean) ** 2, ref_var, se_var)
    assert float(z_mean.max()) < Z_MAX and float(z_var.max()) < Z_MAX
    assert float(ess.min()) > 1_800  # of 38,400 draws (seeded runs: 5,600+)
    assert_feasible(draws, A, b)


def _ranking_problem():
    """f ~ N(0, K) on 5 designs, restricted to f_0 > f_1 > ... > f_4 (a dense cone)."""
    x = torch.linspace(0, 1, 5, dtype=torch.float64)
    K = torch.exp(-((x[:, None] - x) ** 2) / (2 * 0.5**2)) + 0.05 * torch.eye(5)
    D = torch.zeros(4, 5, dtype=torch.float64)
    D[torch.arange(4), torch.arange(4)] = 1.0
    D[torch.arange(4), torch.arange(1, 5)] = -1.0
    return K, -D, torch.zeros(4, dtype=torch.float64)


@functools.lru_cache
def _ranking_reference():
    K, A, b = _ranking_problem()
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2_000_000, 5, generator=g, dtype=torch.float64)
    x = x @ torch.linalg.cholesky(K).mT
    x = x[(x @ A.mT <= b).all(-1)]
    m, v = x.mean(0), x.var(0)
    se_v = ((x - m) ** 2).std(0) / math.sqrt(len(x))
    return len(x), m, v, v.sqrt() / math.sqrt(len(x)), se_v


def test_consistent_ranking_moments_match_rejection_sampling(tkwargs):
    # hard constraints on utility differences: not axis-aligned, through the mean
    accepted, ref_mean, ref_var, se_mean, se_var = _ranking_reference()
    assert accepted > 40_000
    K, A, b = (t.to(**tkwargs) for t in _ranking_problem())
    sampler = LinESS(A, b, covariance_matrix=K, num_chains=64, burnin=100, seed=9)
    assert sampler._is_cone and not sampler._axis_aligned
    draws = sampler.draw(500)
    z_mean, ess = chain_z(draws, lambda x: x, ref_mean, se_mean)
    z_var, _ = chain_z(draws, lambda x: (x - ref_mean) ** 2, ref_var, se_var)
    assert float(z_mean.max()) < Z_MAX and float(z_var.max()) < Z_MAX
    assert float(ess.min()) > 1_200  # of 32,000 draws (seeded runs: 3,700+)
    assert bool((draws.diff(dim=-1) < 0).all())  # every draw keeps the ranking


def test_moments_agree_with_botorch_lin_ess(tkwargs64):
    from botorch.utils.probability.lin_ess import LinearEllipticalSliceSampler

    mean, cov, A, b = (t.to(**tkwargs64) for t in _polytope("polytope"))
    ours = LinESS(A, b, mean, cov, num_chains=32, burnin=100, seed=6)
    torch.manual_seed(6)
    theirs = LinearEllipticalSliceSampler(
        inequality_constraints=(A, b[:, None]),
        interior_point=ours.state[0][:, None],
        mean=mean[:, None],
        covariance_matrix=cov,
        num_chains=32,
        burnin=100,
    )
    x_ours, x_theirs = ours.draw(600), theirs.draw(600).view(600, 32, 10)
    for stat in (lambda x: x, lambda x: x * x):
        values = [stat(x.cpu()).mean(0) for x in (x_ours, x_theirs)]  # 32 x d each
        se = torch.sqrt(sum(v.var(0) / 32 for v in values))
        z = (values[0].mean(0) - values[1].mean(0)) / se
        assert float(z.abs().max()) < Z_MAX


# ----------------------------------------------------------- API behaviour


def _skew_target(m: int, **tkwargs):
    """``Σ = D K Dᵀ + 2 I`` for ``m`` random comparisons of 8 designs (RBF)."""
    g = torch.Generator().manual_seed(7)
    X = torch.rand(8, 2, generator=g, dtype=torch.float64)
    K = torch.exp(-(torch.cdist(X, X) ** 2) / (2 * 0.3**2))
    i = torch.randint(8, (m,), generator=g)
    j = (i + torch.randint(1, 8, (m,), generator=g)) % 8
    D = torch.zeros(m, 8, dtype=torch.float64)
    D[torch.arange(m), i], D[torch.arange(m), j] = 1.0, -1.0
    cov = D @ K @ D.mT + 2.0 * torch.eye(m, dtype=torch.float64)
    return cov.to(**tkwargs)


def test_skew_gp_orthant_draws_are_positive_and_shaped(tkwargs):
    cov = _skew_target(30, **tkwargs)
    A, b = -torch.eye(30, **tkwargs), torch.zeros(30, **tkwargs)
    sampler = LinESS(A, b, covariance_matrix=cov, num_chains=8, burnin=20, seed=0)
    assert sampler._is_cone and sampler._axis_aligned
    draws = sampler.draw(50)
    assert draws.shape == (50, 8, 30)
    assert (
        draws.dtype == tkwargs["dtype"] and draws.device.type == tkwargs["device"].type
    )
    assert bool((draws > 0).all())
    assert sampler.lifetime_steps == 70
    assert sampler.state.shape == (8, 30)


def test_seed_makes_draws_reproducible_and_thinning_keeps_every_kth(tkwargs):
    cov = _skew_target(12, **tkwargs)
    A, b = -torch.eye(12, **tkwargs), torch.zeros(12, **tkwargs)

    def make(**kw):
        return LinESS(A, b, covariance_matrix=cov, num_chains=4, burnin=5, **kw)

    torch.testing.assert_close(make(seed=3).draw(10), make(seed=3).draw(10))
    gen = torch.Generator(device=tkwargs["device"]).manual_seed(3)
    torch.testing.assert_close(make(generator=gen).draw(10), make(seed=3).draw(10))
    assert not torch.equal(make(seed=3).draw(10), make(seed=4).draw(10))
    thinned = make(seed=3, thinning=2, block_size=64).draw(5)
    torch.testing.assert_close(thinned, make(seed=3, block_size=64).draw(15)[2::3])
