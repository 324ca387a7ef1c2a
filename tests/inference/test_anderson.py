import pytest
import torch

from prefbo.inference import anderson as anderson_module
from prefbo.inference import run_ep
from prefbo.inference.anderson import ANDERSON_REACH, Anderson
from prefbo.likelihoods import PairwiseProbitLikelihood


def _sweep(anderson, tau, d_tau, nu=0.0, d_nu=0.0):
    t = lambda v: torch.tensor([[v]], dtype=torch.float64)  # noqa: E731
    return anderson.extrapolate(
        t(tau),
        t(nu),
        t(d_tau),
        t(d_nu),
        torch.ones(1, dtype=torch.float64),
        torch.zeros(1, dtype=torch.bool),
    )


def test_a_contraction_is_extrapolated_to_its_fixed_point():
    # the scalar map x -> 0.9 x + 0.1 (fixed point 1) from x = 0: plain
    # steps crawl (ρ = 0.9: 0.47 off after 6 sweeps), the accelerated ones land
    # near 1 (the stopping test's scaling 1/(1 + |x|) makes the map nonlinear
    # to the least-squares fit, so not exactly)
    anderson, x = Anderson(memory=5), 0.0
    for _ in range(6):
        d = 0.9 * x + 0.1 - x
        tau, _ = _sweep(anderson, x + d, d)
        x = tau.item()
    assert abs(x - 1.0) < 0.02 < 0.9**6  # plain: 0.47 off


def test_a_correction_beyond_the_reach_is_not_taken_and_restarts_the_history(
    monkeypatch,
):
    # two sweeps whose scaled residuals barely differ while the sites moved:
    # the least-squares fit extrapolates ~1e3 sweeps' changes away
    anderson = Anderson(memory=5)
    _sweep(anderson, 1.0, 0.1)
    tau, _ = _sweep(anderson, 2.0, 0.1498)
    assert tau.item() == 2.0  # the plain damped step
    assert anderson.dF == [] and anderson.dG == []
    # the same proposal inside a wider reach is taken
    wide = Anderson(memory=5)
    _sweep(wide, 1.0, 0.1)
    monkeypatch.setattr(anderson_module, "ANDERSON_REACH", 1e6)
    far, _ = _sweep(wide, 2.0, 0.1498)
    assert far.item() > 2.0 + ANDERSON_REACH * 0.1498


@pytest.mark.parametrize("noise_std", [1e-8, 1e-11])
def test_sites_pinned_by_a_contradiction_converge_in_few_sweeps(noise_std):
    # [0, 1] and [1, 0] at a tiny probit scale: the site precisions grow by
    # ~1.6x per sweep up to ~0.3/s²; plain sweeps take 30-40 (230-260 when
    # the growth halved the step), the acceleration (whose unbounded
    # proposals threw them off) as few
    K = torch.tensor([[1.0, 0.57], [0.57, 1.0]], dtype=torch.float64)
    L, comp = torch.linalg.cholesky(K), torch.tensor([[0, 1], [1, 0]])
    lik = PairwiseProbitLikelihood(noise_std=noise_std)
    plain = run_ep(L, comp, lik, anderson_memory=0, max_iter=1000)
    fast = run_ep(L, comp, lik, max_iter=1000)
    assert bool(plain.converged) and bool(fast.converged)
    assert fast.iterations < 100 and plain.iterations < 100
    torch.testing.assert_close(
        fast.curvature * noise_std**2, plain.curvature * noise_std**2, rtol=1e-7, atol=0
    )
