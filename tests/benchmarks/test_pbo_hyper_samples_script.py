"""``benchmarks/pbo_hyper_samples.py``: hyperparameters integrated out."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from prefbo.exceptions import ConvergenceWarning


def _model(dim=1, n=10, m=40, seed=5, noisy=True):
    r"""An EP model fitted to ``m`` answers (noisy, or noiseless: separable)
    about ``n`` random designs, and a builder of models of the same data with
    another kernel."""
    from prefbo.loop.model_kinds import EPKind

    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, dim, generator=gen, dtype=torch.float64)
    u = 3 * torch.sin(6 * X).sum(-1)
    pairs = torch.stack([torch.randperm(n, generator=gen)[:2] for _ in range(m)])
    diff = u[pairs[:, 0]] - u[pairs[:, 1]]
    win = diff >= 0
    if noisy:
        p = torch.distributions.Normal(0.0, 1.0).cdf(diff / math.sqrt(2))
        win = torch.rand(m, generator=gen, dtype=torch.float64) < p
    comps = torch.where(win.unsqueeze(-1), pairs, pairs.flip(-1))
    kind = EPKind({}, seed)
    model = kind.build(X, comps)
    kind.fit(model, {})
    model.eval()

    def build(kernel):
        return kind.build(X, comps, kernel)

    return model, build


def test_log_posterior_gradient_matches_finite_differences(load_benchmark):
    bench = load_benchmark("pbo_hyper_samples")
    model, _ = _model(dim=2)
    z0 = bench.get_z(model.covar_module) + torch.tensor(
        [0.3, -0.2, -0.5], dtype=torch.float64
    )
    _, g = bench.log_posterior(model, z0, grad=True)
    h = 1e-4
    fd = []
    for i in range(3):
        e = torch.zeros(3, dtype=torch.float64)
        e[i] = h
        up, _ = bench.log_posterior(model, z0 + e)
        down, _ = bench.log_posterior(model, z0 - e)
        fd.append((up - down) / (2 * h))
    # EP's explicit evidence gradient is exact at the fixed point (tol 1e-6)
    assert g.tolist() == pytest.approx(fd, rel=1e-3, abs=1e-4)


@pytest.mark.slow  # about 25 s: 289 EP evidences on a grid
def test_importance_weights_give_the_posterior_mean_of_a_grid(
    load_benchmark, monkeypatch
):
    bench = load_benchmark("pbo_hyper_samples")
    # the normal's own curvature (no cap on its spread): an interior posterior
    monkeypatch.setattr(bench, "PRECISION", (1e-3, 1e6))
    model, build = _model()
    z0, L = bench.normal_at_fit(model)
    # independent: the posterior of (log ℓ, log s) on a grid over ±4 of the
    # normal's standard deviations (the outputscale's within its constraint)
    con = model.covar_module.raw_outputscale_constraint
    lo, hi = math.log(float(con.lower_bound)), math.log(float(con.upper_bound))
    sd = (L @ L.T).diagonal().sqrt()
    ls_axis = torch.linspace(-4, 4, 17, dtype=torch.float64) * sd[0] + z0[0]
    os_lo = max(lo + 1e-6, float(z0[1] - 4 * sd[1]))
    os_hi = min(hi - 1e-6, float(z0[1] + 4 * sd[1]))
    os_axis = torch.linspace(os_lo, os_hi, 17, dtype=torch.float64)
    grid = torch.cartesian_prod(ls_axis, os_axis)
    work = build(model.covar_module)
    zs, log_q = bench.antithetic_draws(z0, L, 100, seed=0)
    # EP may stop short of tol = 1e-6 at the far corners (a lengthscale of
    # 0.03 with an outputscale of 200), where the posterior has no mass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        lp = torch.tensor([bench.log_posterior(work, z)[0] for z in grid])
        members, w = bench.importance_members(model, build, zs, log_q)
    p = torch.softmax(lp, 0)
    mean_grid = (p.unsqueeze(-1) * grid).sum(0)
    kept = torch.stack([bench.get_z(m.covar_module) for m in members])
    assert float(w.sum()) == pytest.approx(1.0)
    mean_is = (w.unsqueeze(-1) * kept).sum(0)
    ess = 1.0 / float((w**2).sum())
    spread = ((p.unsqueeze(-1) * (grid - mean_grid) ** 2).sum(0)).sqrt()
    tol = 4 * spread / math.sqrt(ess)
    assert ((mean_is - mean_grid).abs() < tol).all(), (mean_is, mean_grid, tol)
    # the fit is the posterior's mode, not its mean: the weights move the
    # draws' plain average (the proposal's mean) towards the grid's
    plain = kept.mean(0)
    assert (plain - mean_grid).norm() > 2 * (mean_is - mean_grid).norm()


def test_draws_outside_the_outputscale_constraint_get_no_weight(load_benchmark):
    bench = load_benchmark("pbo_hyper_samples")
    model, build = _model(dim=1)
    z0 = bench.get_z(model.covar_module)
    zs = torch.stack([z0, z0 + torch.tensor([0.0, 20.0], dtype=torch.float64)])
    members, w = bench.importance_members(model, build, zs, torch.zeros(2))
    assert len(members) == 1 and w.tolist() == [1.0]
    members, w = bench.importance_members(model, build, zs[1:], torch.zeros(1))
    assert members == [model] and w.tolist() == [1.0]


def test_a_short_run_recommends_by_the_mixture_mean(load_benchmark):
    bench = load_benchmark("pbo_hyper_samples")
    loops = []

    def make(u, seed):
        loops.append(bench.HyperSamplesLoop(u, seed, 4))
        return loops[-1]

    rec = bench.pbo_regret.run_one("Branin", 0.1, 0, "x", answers=6, make_loop=make)
    assert len(rec["regret"]) == 6 and all(r >= 0 for r in rec["regret"])
    opt = loops[0].opt
    members, w = opt.model.hyper_members
    assert 1 <= len(members) <= 4 and sum(w) == pytest.approx(1.0)
    designs, _ = opt.data()
    Z = opt.to_unit(designs).unsqueeze(-2)
    with torch.no_grad():
        means = torch.stack([m.posterior(Z).mean.reshape(-1) for m in members])
    mixture = (torch.tensor(w, dtype=torch.float64).unsqueeze(-1) * means).sum(0)
    assert torch.equal(opt.best()[0], designs[int(mixture.argmax())])


def test_folded_proposal_is_a_density_on_the_box(load_benchmark):
    bench = load_benchmark("pbo_hyper_samples")
    lo, hi = math.log(0.01), math.log(100.0)
    z0 = torch.tensor([math.log(0.3), hi], dtype=torch.float64)  # at the edge
    L = torch.tensor([[0.4, 0.0], [0.3, 1.0]], dtype=torch.float64)
    zs, _ = bench.antithetic_draws(z0, L, 1000, seed=0)
    folded, log_q = bench.fold_into_box(z0, L, zs, (lo, hi))
    assert (folded[:, -1] <= hi).all() and (folded[:, -1] >= lo).all()
    assert torch.equal(folded[:, 0], zs[:, 0])
    # independent: the folded density integrates to the normal's normaliser
    # over the box (its mass beyond one reflection is nil here)
    a = torch.linspace(float(z0[0]) - 4, float(z0[0]) + 4, 801, dtype=torch.float64)
    b = torch.linspace(lo, hi, 2001, dtype=torch.float64)
    grid = torch.cartesian_prod(a, b)
    _, log_grid = bench.fold_into_box(z0, L, grid, (lo, hi))
    mass = float(torch.trapezoid(torch.trapezoid(
        log_grid.exp().reshape(801, 2001), b), a))  # fmt: skip
    assert mass == pytest.approx(2 * math.pi * float(L.det()), rel=1e-4)
    # the draws' log q is that density at the folded points
    _, again = bench.fold_into_box(z0, L, folded, (lo, hi))
    assert torch.allclose(again, log_q)


def test_a_fit_at_the_box_edge_spreads_the_outputscale_inside(load_benchmark):
    bench = load_benchmark("pbo_hyper_samples")
    model, _ = _model(n=8, m=12, seed=0, noisy=False)
    _, hi = bench.box_edges(model.covar_module)
    assert float(bench.get_z(model.covar_module)[-1]) == pytest.approx(hi, abs=1e-3)
    _, L = bench.normal_at_fit(model)  # the forward step reads the prior's tail
    assert float((L @ L.T)[-1, -1].sqrt()) == pytest.approx(0.01, rel=1e-3)
    _, L = bench.normal_at_fit(model, inside=True)
    assert float((L @ L.T)[-1, -1].sqrt()) > 0.3
