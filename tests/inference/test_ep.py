import math
import warnings

import pytest
import torch
from scipy import integrate, special

from prefbo.exceptions import (
    ConvergenceWarning,
    InputDataError,
    InputTypeError,
    NumericalError,
    UnsupportedError,
)
from prefbo.inference import ep_evidence, find_mode, run_ep
from prefbo.inference import stiff as stiff_module
from prefbo.likelihoods import PairwiseLogitLikelihood, PairwiseProbitLikelihood
from prefbo.models import PairwiseEPGP
from prefbo.utils.testing import make_pairwise_data, tolerance


def _rbf(X, lengthscale, outputscale):
    return outputscale * torch.exp(-torch.cdist(X, X).pow(2) / (2 * lengthscale**2))


def _difference_moments(state):
    mu = state.mode[..., 0] - state.mode[..., 1]
    S = state.posterior_covariance()
    return mu, S[..., 0, 0] + S[..., 1, 1] - 2 * S[..., 0, 1]


@pytest.mark.parametrize("sigma", [1.0, 0.3, 0.1, 0.03, 0.01])
@pytest.mark.parametrize("form", ["whitened", "precision"])
def test_single_answer_is_exact(sigma, form, tkwargs):
    """One answer, prior Var(Δ) = 1: closed-form posterior moments and Z = 1/2."""
    K = torch.eye(2, **tkwargs) * 0.5
    lik = PairwiseProbitLikelihood(noise_std=sigma)
    comps = torch.tensor([[0, 1]], device=tkwargs["device"])
    state = run_ep(torch.linalg.cholesky(K), comps, lik, form=form)
    mean, var = _difference_moments(state)
    s2 = 2 * sigma**2
    exact_mean = math.sqrt(2 / math.pi) / math.sqrt(1 + s2)
    exact_var = 1 - (2 / math.pi) / (1 + s2)
    tol = tolerance(tkwargs["dtype"], 1e-9, 1e-4)
    assert mean.item() == pytest.approx(exact_mean, abs=tol)
    assert var.item() == pytest.approx(exact_var, abs=tol)
    assert state.evidence.item() == pytest.approx(math.log(0.5), abs=tol)


def test_repeated_answers_close_to_quadrature():
    """Four answers on one pair: EP vs the exact 1-D posterior of Δ."""
    K = torch.tensor([[1.0, 0.2], [0.2, 0.8]], dtype=torch.float64)
    v0, s = 1.0 + 0.8 - 0.4, math.sqrt(2) * 0.4
    comp = torch.tensor([[0, 1], [0, 1], [0, 1], [1, 0]])
    lik = PairwiseProbitLikelihood(noise_std=0.4)

    def post(d, k):
        z = d / s
        return (
            d**k
            * math.exp(
                -0.5 * d * d / v0 + 3 * special.log_ndtr(z) + special.log_ndtr(-z)
            )
            / math.sqrt(2 * math.pi * v0)
        )

    Z = integrate.quad(post, -12, 12, args=(0,))[0]
    m1 = integrate.quad(post, -12, 12, args=(1,))[0] / Z
    m2 = integrate.quad(post, -12, 12, args=(2,))[0] / Z
    ep = run_ep(torch.linalg.cholesky(K), comp, lik)
    mean, var = _difference_moments(ep)
    assert mean.item() == pytest.approx(m1, rel=0.03)
    assert var.item() == pytest.approx(m2 - m1**2, rel=0.05)
    assert ep.evidence.item() == pytest.approx(math.log(Z), abs=0.02)
    # and EP is closer to the exact mean than the Laplace mode is
    lap = find_mode(torch.linalg.cholesky(K), comp, lik)
    assert abs(mean.item() - m1) < abs((lap.mode[0] - lap.mode[1]).item() - m1)


class _AffineProbit(PairwiseProbitLikelihood):
    """``F = a + b Φ`` (a lapse rate: ``a = ε/2``, ``b = 1 - ε``)."""

    a, b = 0.1, 0.8

    def _log_prob(self, z):
        return torch.log(self.a + self.b * torch.special.ndtr(z))

    def _terms(self, z):
        logp = self._log_prob(z)
        r = self.b * torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi) / logp.exp()
        w = r * (z + r)
        return logp, r, w, r - w * (z + 2 * r)


def test_ep_reads_the_likelihoods_tilted_moments():
    """One answer with ``F = a + b Φ`` (its ``Z = F(m / √(s² + v))``): EP's
    moments and evidence against quadrature of the exact posterior."""
    K = torch.tensor([[1.0, 0.3], [0.3, 0.7]], dtype=torch.float64)
    v0, s = 1.0 + 0.7 - 0.6, math.sqrt(2) * 0.5
    lik = _AffineProbit(noise_std=0.5)

    def post(d, k):
        f = lik.a + lik.b * special.ndtr(d / s)
        return d**k * f * math.exp(-0.5 * d * d / v0) / math.sqrt(2 * math.pi * v0)

    Z = integrate.quad(post, -12, 12, args=(0,))[0]
    m1 = integrate.quad(post, -12, 12, args=(1,))[0] / Z
    m2 = integrate.quad(post, -12, 12, args=(2,))[0] / Z
    ep = run_ep(torch.linalg.cholesky(K), torch.tensor([[0, 1]]), lik)
    mean, var = _difference_moments(ep)
    assert mean.item() == pytest.approx(m1, rel=1e-8)
    assert var.item() == pytest.approx(m2 - m1**2, rel=1e-8)
    assert ep.evidence.item() == pytest.approx(math.log(Z), abs=1e-9)


def test_ep_evidence_gradient_matches_finite_differences():
    X, comp, _ = make_pairwise_data(20, 45, seed=3)
    theta = torch.tensor([0.35, 2.5], dtype=torch.float64, requires_grad=True)

    def K_of(t):
        return _rbf(X, t[0], t[1]) + 1e-6 * torch.eye(20, dtype=torch.float64)

    lik = PairwiseProbitLikelihood(0.7)
    opts = {"tol": 1e-12, "max_iter": 500}
    ev, state = ep_evidence(K_of(theta), comp, lik, **opts)
    assert bool(state.converged)
    (grad,) = torch.autograd.grad(ev, theta)
    for k in range(2):
        e = torch.zeros(2, dtype=torch.float64)
        e[k] = 1e-5
        plus, _ = ep_evidence(K_of(theta.detach() + e), comp, lik, **opts)
        minus, _ = ep_evidence(K_of(theta.detach() - e), comp, lik, **opts)
        fd = (plus - minus).item() / 2e-5
        assert grad[k].item() == pytest.approx(fd, rel=1e-5, abs=1e-7)


def test_batched_ep_equals_loop(tkwargs):
    X, comp, _ = make_pairwise_data(12, 30, batch_shape=torch.Size([3]), **tkwargs)
    K = _rbf(X, 0.5, 3.0) + 1e-3 * torch.eye(12, **tkwargs)
    L = torch.linalg.cholesky(K)
    lik = PairwiseProbitLikelihood()
    batched = run_ep(L, comp, lik)
    tol = tolerance(tkwargs["dtype"], 1e-7, 2e-3)
    for b in range(3):
        single = run_ep(L[b], comp[b], lik)
        torch.testing.assert_close(batched.mode[b], single.mode, rtol=tol, atol=tol)
        torch.testing.assert_close(
            batched.evidence[b], single.evidence, rtol=tol, atol=tol
        )


def test_forms_agree_and_warm_start_reaches_same_sites():
    X, comp, _ = make_pairwise_data(40, 120, d=3, seed=2)
    K = _rbf(X, 0.6, 8.0) + 1e-6 * torch.eye(40, dtype=torch.float64)
    L = torch.linalg.cholesky(K)
    lik = PairwiseProbitLikelihood()
    w = run_ep(L, comp, lik, form="whitened")
    p = run_ep(L, comp, lik, form="precision")
    torch.testing.assert_close(w.mode, p.mode, rtol=1e-6, atol=1e-7)
    assert w.evidence.item() == pytest.approx(p.evidence.item(), rel=1e-9)
    K2 = _rbf(X, 0.62, 8.5) + 1e-6 * torch.eye(40, dtype=torch.float64)
    L2 = torch.linalg.cholesky(K2)
    cold, warm = run_ep(L2, comp, lik), run_ep(L2, comp, lik, init=w)
    torch.testing.assert_close(cold.site_nu, warm.site_nu, rtol=1e-6, atol=1e-8)
    assert warm.iterations < cold.iterations


def test_site_precisions_are_non_negative_under_contradictions():
    # contradictory answers (a cycle and its reversal) stress the cavities
    comp = torch.tensor([[0, 1], [1, 2], [2, 0], [1, 0], [0, 1], [0, 1]])
    K = 5.0 * torch.eye(3, dtype=torch.float64) + 1.0
    state = run_ep(torch.linalg.cholesky(K), comp, PairwiseProbitLikelihood(0.2))
    assert (state.curvature >= 0).all() and bool(state.converged)
    assert int(state.invalid_cavities) == 0


def test_ep_needs_probit():
    K = torch.eye(2, dtype=torch.float64)
    with pytest.raises(UnsupportedError, match="probit likelihood"):
        run_ep(
            torch.linalg.cholesky(K), torch.tensor([[0, 1]]), PairwiseLogitLikelihood()
        )
    with pytest.raises(
        InputDataError,
        match=r"damping must be None or a float in \(0, 1\]; got damping=1\.5",
    ):
        run_ep(
            torch.linalg.cholesky(K),
            torch.tensor([[0, 1]]),
            PairwiseProbitLikelihood(),
            damping=1.5,
        )


def _slow_ep_problem():
    # decisive, nearly noiseless answers sharing designs: plain parallel EP
    # contracts slowly here (~60 sweeps to the default tolerance)
    X, comp, _ = make_pairwise_data(30, 60, d=3, seed=2)
    K = _rbf(X, 0.3, 20.0) + 1e-6 * torch.eye(30, dtype=torch.float64)
    return torch.linalg.cholesky(K), comp, PairwiseProbitLikelihood(0.3)


@pytest.mark.parametrize("form", ["whitened", "precision"])
def test_anderson_acceleration_reaches_the_plain_fixed_point_in_fewer_sweeps(form):
    L, comp, lik = _slow_ep_problem()
    plain = run_ep(L, comp, lik, anderson_memory=0, form=form)
    fast = run_ep(L, comp, lik, form=form)
    # the fixed point to far below the default tolerance, by plain sweeps
    ref = run_ep(L, comp, lik, anderson_memory=0, tol=1e-12, max_iter=3000)
    assert bool(fast.converged) and bool(plain.converged)
    # 25 sweeps against plain EP's 48 (whose step recovers in monotone runs)
    assert fast.iterations <= 0.6 * plain.iterations
    for state in (plain, fast):
        torch.testing.assert_close(state.mode, ref.mode, rtol=0, atol=1e-7)
        torch.testing.assert_close(state.site_nu, ref.site_nu, rtol=1e-6, atol=1e-7)
        assert state.evidence.item() == pytest.approx(ref.evidence.item(), rel=1e-10)
        assert (state.curvature >= 0).all()


def test_sites_of_the_first_answers_warm_start_a_run_on_more():
    L, comp, lik = _slow_ep_problem()
    first = run_ep(L, comp[:54], lik)
    cold = run_ep(L, comp, lik)
    warm = run_ep(L, comp, lik, init=first.sites())
    assert bool(warm.converged)
    torch.testing.assert_close(warm.mode, cold.mode, rtol=0, atol=1e-7)
    assert warm.evidence.item() == pytest.approx(cold.evidence.item(), rel=1e-10)
    assert warm.iterations < cold.iterations
    # sites of other comparisons than the first rows are not used
    shifted = run_ep(L, comp[6:], lik)
    ignored = run_ep(L, comp, lik, init=shifted.sites())
    assert ignored.iterations == cold.iterations
    assert torch.equal(ignored.mode, cold.mode)


def test_anderson_memory_is_checked():
    K = torch.eye(2, dtype=torch.float64)
    L, comp = torch.linalg.cholesky(K), torch.tensor([[0, 1]])
    for bad, error, got in (
        (-1, InputDataError, r"anderson_memory=-1"),
        (2.5, InputTypeError, r"float 2\.5"),
        (True, InputTypeError, r"bool True"),
    ):
        with pytest.raises(
            error, match=r"anderson_memory must be an int >= 0; got " + got
        ):
            run_ep(L, comp, PairwiseProbitLikelihood(), anderson_memory=bad)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (
            {"max_iter": 0},
            InputDataError,
            r"max_iter must be an int >= 1; got max_iter=0\.",
        ),
        (
            {"max_iter": -3},
            InputDataError,
            r"max_iter must be an int >= 1; got max_iter=-3\.",
        ),
        (
            {"max_iter": 2.5},
            InputTypeError,
            r"max_iter must be an int >= 1; got float 2\.5\.",
        ),
        (
            {"max_iter": True},
            InputTypeError,
            r"max_iter must be an int >= 1; got bool True\.",
        ),
        (
            {"tol": -1e-3},
            InputDataError,
            r"tol must be None or a finite float >= 0; got tol=-0\.001\.",
        ),
        (
            {"tol": math.nan},
            InputDataError,
            r"tol must be None or a finite float >= 0; got tol=nan\.",
        ),
        (
            {"tol": math.inf},
            InputDataError,
            r"tol must be None or a finite float >= 0; got tol=inf\.",
        ),
        (
            {"tol": "a"},
            InputTypeError,
            r"tol must be None or a finite float >= 0; got str 'a'\.",
        ),
        (
            {"damping": "a"},
            InputTypeError,
            r"damping must be None or a float in \(0, 1\]; got str 'a'\.",
        ),
        (
            {"damping": math.nan},
            InputDataError,
            r"damping must be None or a float in \(0, 1\]; got damping=nan\.",
        ),
        ({"form": "dense"}, InputDataError, r"form must be one of .*; got 'dense'\."),
    ],
)
def test_ep_options_are_checked(kwargs, error, message):
    """Bad options raise a typed error naming them, before EP: InputTypeError (a
    TypeError) for a wrong type, InputDataError (a ValueError) for a wrong value."""
    L, comp = torch.eye(2, dtype=torch.float64), torch.tensor([[0, 1]])
    with pytest.raises(error, match=message):
        run_ep(L, comp, PairwiseProbitLikelihood(), **kwargs)
    assert issubclass(InputDataError, ValueError)
    assert issubclass(InputTypeError, TypeError)


def test_ep_accepts_a_zero_tolerance_and_one_sweep():
    L, comp = torch.eye(3, dtype=torch.float64), torch.tensor([[0, 1], [1, 2]])
    lik = PairwiseProbitLikelihood()
    ref = run_ep(L, comp, lik, tol=1e-12, max_iter=1000)
    # tol=0 is honoured: the run stops at the budget, at the fixed point
    with pytest.warns(ConvergenceWarning, match=r"after 60 sweeps .*\(tol=0\)"):
        exact = run_ep(L, comp, lik, tol=0, max_iter=60)
    assert exact.iterations == 60
    torch.testing.assert_close(exact.mode, ref.mode, rtol=0, atol=1e-10)
    one = run_ep(L, comp, lik, init=ref.sites(), max_iter=1, anderson_memory=0)
    assert one.iterations == 1


@pytest.mark.parametrize("noise_std", [1e-6, 1e-8, 3e-9, 1e-11])
def test_ep_variance_at_tiny_noise_for_contradicting_answers(noise_std):
    # as s -> 0 the exact posterior of [0, 1] and [1, 0] is the prior
    # conditioned on f0 = f1 (the likelihood Φ(Δ/s) Φ(-Δ/s) pins Δ to 0)
    torch.manual_seed(0)
    X = torch.rand(2, 2, dtype=torch.float64)
    model = PairwiseEPGP(
        X,
        torch.tensor([[0, 1], [1, 0]]),
        likelihood=PairwiseProbitLikelihood(noise_std=noise_std),
    )
    var = model.posterior(X).variance.detach().squeeze(-1)
    K = model._train_covariance(X).detach()
    expected = 0.5 * (K[0, 0] + K[0, 1]) - (
        K[0, 0] - model.covar_module(X).to_dense().detach()[0, 0]
    )
    torch.testing.assert_close(var, expected.expand(2), rtol=1e-6, atol=1e-8)
    assert bool(model.ep_state.converged)


def _conditioned_on_equal(model, X, Xs, designs):
    r"""Mean and covariance at ``Xs`` of the prior conditioned on equal
    utilities at ``designs`` (the training covariance, nugget included, at
    the designs; the kernel between them and ``Xs``)."""
    K = model._train_covariance(X).detach()
    k = model.covar_module(Xs, X).to_dense().detach()
    kss = model.covar_module(Xs).to_dense().detach()
    D = torch.zeros(len(designs) - 1, X.shape[0], dtype=X.dtype)
    for r, (i, j) in enumerate(zip(designs[:-1], designs[1:], strict=True)):
        D[r, i], D[r, j] = 1.0, -1.0
    G = k @ D.mT
    return torch.zeros(Xs.shape[0], dtype=X.dtype), kss - G @ torch.linalg.solve(
        D @ K @ D.mT, G.mT
    )


@pytest.mark.parametrize("noise_std", [1e-8, 1e-10])
def test_ep_at_tiny_noise_on_a_cycle_is_the_prior_conditioned_on_equality(noise_std):
    # a > b > c > a: as s -> 0 the answers pin f_a = f_b = f_c and say
    # nothing else; a fourth design enters through the prior only
    g = torch.Generator().manual_seed(4)
    X = torch.rand(4, 3, generator=g, dtype=torch.float64)
    Xs = torch.rand(5, 3, generator=g, dtype=torch.float64)
    model = PairwiseEPGP(
        X,
        torch.tensor([[0, 1], [1, 2], [2, 0]]),
        likelihood=PairwiseProbitLikelihood(noise_std=noise_std),
    )
    post = model.posterior(Xs)
    mean, cov = _conditioned_on_equal(model, X, Xs, [0, 1, 2])
    torch.testing.assert_close(post.mean.detach().squeeze(-1), mean, rtol=0, atol=1e-6)
    torch.testing.assert_close(
        post.covariance_matrix.detach(), cov, rtol=1e-6, atol=1e-8
    )
    assert bool(model.ep_state.converged)


@pytest.mark.parametrize(
    "noise_std, seed", [(1e-8, 6), (1e-9, 0), (1e-10, 1), (1e-11, 0), (1e-11, 6)]
)
def test_ep_on_a_tiny_noise_cycle_converges_through_the_sites_growth(noise_std, seed):
    # the pinned differences' site precisions grow by a factor per sweep on
    # their way to 1/s²: a change that grows while every site moves on the
    # same way is no oscillation, and halving the step there left these
    # cycles far from the fixed point after 200 sweeps (a ConvergenceWarning)
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(3, 2, dtype=torch.float64, generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = PairwiseEPGP(
            X,
            torch.tensor([[0, 1], [1, 2], [2, 0]]),
            likelihood=PairwiseProbitLikelihood(noise_std=noise_std),
        )
        post = model.posterior(X)
    assert model.ep_state.iterations <= 60
    mean, cov = _conditioned_on_equal(model, X, X, [0, 1, 2])
    # the sites reach ~1/s² (5e21 at 1e-11); the mean carries their rounding,
    # ~0.7 ε/s on 8 seeds of two cycles at s = 1e-8 ... 1e-11
    atol = 2 * torch.finfo(torch.float64).eps / noise_std
    torch.testing.assert_close(post.mean.detach().squeeze(-1), mean, rtol=0, atol=atol)
    torch.testing.assert_close(
        post.covariance_matrix.detach(), cov, rtol=1e-6, atol=1e-8
    )


def test_stiff_ep_agrees_with_the_formed_system_where_both_are_accurate(
    monkeypatch,
):
    # at noise 1e-3 the formed K⁻¹ + W still holds the prior to ~1e-10: the
    # projector form (forced by a zero stiffness limit) must give the same
    # sites, moments, evidence and evidence gradient
    X, comp, _ = make_pairwise_data(12, 30, d=2, seed=5)
    comp = torch.cat([comp, comp[:6].flip(-1)])  # six contradicted answers
    lik = PairwiseProbitLikelihood(noise_std=1e-3)
    theta = torch.tensor([0.4, 2.0], dtype=torch.float64)

    def run(limit):
        monkeypatch.setitem(stiff_module.STIFF_LIMIT, torch.float64, limit)
        t = theta.clone().requires_grad_(True)
        K = _rbf(X, t[0], t[1]) + 1e-6 * torch.eye(12, dtype=torch.float64)
        ev, state = ep_evidence(K, comp, lik, tol=1e-9, max_iter=2000)
        (grad,) = torch.autograd.grad(ev, t)
        return ev.detach(), state, grad

    ev_d, dense, grad_d = run(math.inf)
    ev_s, stiff, grad_s = run(0.0)
    assert dense._projector is None and stiff._projector is not None
    assert bool(dense.converged) and bool(stiff.converged)
    torch.testing.assert_close(stiff.mode, dense.mode, rtol=1e-7, atol=1e-9)
    torch.testing.assert_close(
        stiff.posterior_covariance(),
        dense.posterior_covariance(),
        rtol=1e-7,
        atol=1e-10,
    )
    # α = K⁻¹μ: the projector form solves with L (residual at rounding), the
    # formed one takes Dᵀν̃ - Wμ, which cancels by W's size (~1e6 here)
    K = _rbf(X, theta[0], theta[1]) + 1e-6 * torch.eye(12, dtype=torch.float64)
    assert (K @ stiff.alpha - stiff.mode).abs().max() < 1e-12
    torch.testing.assert_close(stiff.alpha, dense.alpha, rtol=0, atol=3e-6)
    assert ev_s.item() == pytest.approx(ev_d.item(), rel=1e-9)
    # the gradient ½(ααᵀ - R): R = L⁻ᵀPL⁻¹ in the projector form matches
    # finite differences of its evidence; the formed W - WΣW cancels to ~1e-4
    for k in range(2):
        e = torch.zeros(2, dtype=torch.float64)
        e[k] = 1e-5
        K_p = _rbf(X, *(theta + e)) + 1e-6 * torch.eye(12, dtype=torch.float64)
        K_m = _rbf(X, *(theta - e)) + 1e-6 * torch.eye(12, dtype=torch.float64)
        plus, _ = ep_evidence(K_p, comp, lik, tol=1e-9, max_iter=2000)
        minus, _ = ep_evidence(K_m, comp, lik, tol=1e-9, max_iter=2000)
        fd = (plus - minus).item() / 2e-5
        assert grad_s[k].item() == pytest.approx(fd, rel=1e-6)
    torch.testing.assert_close(grad_s, grad_d, rtol=3e-4, atol=0)


def _conditioned_on_groups(model, X, groups):
    r"""Mean and covariance at ``X`` of the prior conditioned on equal
    utilities within each group of designs."""
    K = model._train_covariance(X).detach()
    rows = [(g[i], g[i + 1]) for g in groups for i in range(len(g) - 1)]
    D = torch.zeros(len(rows), X.shape[0], dtype=X.dtype)
    for r, (i, j) in enumerate(rows):
        D[r, i], D[r, j] = 1.0, -1.0
    G = K @ D.mT
    return G.new_zeros(X.shape[0]), K - G @ torch.linalg.solve(D @ K @ D.mT, G.mT)


@pytest.mark.parametrize("noise_std", [1e-9, 1e-10, 1e-11])
@pytest.mark.parametrize("seed", [0, 3])
def test_ep_on_disjoint_tiny_noise_cycles_stops_at_the_sweeps_rounding_floor(
    noise_std, seed
):
    # sites of ~1/s² (1e22 at 1e-11) are recomputed each sweep with a
    # relative rounding of ~1e-8 and more: a change that stalls there is
    # converged, not 200 sweeps and a ConvergenceWarning
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(6, 2, dtype=torch.float64, generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = PairwiseEPGP(
            X,
            torch.tensor([[0, 1], [1, 2], [2, 0], [3, 4], [4, 5], [5, 3]]),
            likelihood=PairwiseProbitLikelihood(noise_std=noise_std),
        )
        post = model.posterior(X)
    assert bool(model.ep_state.converged)
    assert model.ep_state.iterations <= 100
    mean, cov = _conditioned_on_groups(model, X, [[0, 1, 2], [3, 4, 5]])
    atol = 2 * torch.finfo(torch.float64).eps / noise_std  # the sites' rounding
    torch.testing.assert_close(post.mean.detach().squeeze(-1), mean, rtol=0, atol=atol)
    torch.testing.assert_close(
        post.covariance_matrix.detach(), cov, rtol=1e-6, atol=1e-8
    )


def test_a_slow_sweep_is_not_taken_for_one_at_its_rounding_floor():
    # a small fixed damping makes the change shrink by a few per cent a
    # sweep: far above rounding, the run goes on to the tolerance
    X, comp, _ = make_pairwise_data(10, 30, d=2, seed=2)
    lik = PairwiseProbitLikelihood(noise_std=0.1)
    L = torch.linalg.cholesky(_rbf(X, 0.4, 1.0) + 1e-6 * torch.eye(10).double())
    ref = run_ep(L, comp, lik, tol=1e-12, max_iter=500)
    slow = run_ep(L, comp, lik, damping=0.05, anderson_memory=0, max_iter=3000)
    assert bool(slow.converged) and slow.iterations > 100
    torch.testing.assert_close(slow.mode, ref.mode, rtol=0, atol=1e-7)


def test_float32_ep_on_ordinary_data_converges_like_float64():
    X, comp, _ = make_pairwise_data(15, 150, 2, noise_std=0.03, seed=0)
    lik = PairwiseProbitLikelihood(noise_std=0.03)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m64 = PairwiseEPGP(X, comp, likelihood=lik)
        m32 = PairwiseEPGP(X.float(), comp, likelihood=lik)
        mean32 = m32.posterior(X.float()).mean.detach()
    assert bool(m32.ep_state.converged) and m32.ep_state.iterations <= 60
    mean64 = m64.posterior(X).mean.detach()
    torch.testing.assert_close(mean32.double(), mean64, rtol=0, atol=2e-2)


@pytest.mark.parametrize("noise_std", [1e-5, 1e-8, 1e-11])
def test_float32_ep_refuses_site_precisions_it_cannot_hold(noise_std):
    # a 5-cycle at a tiny probit scale: sites of ~1/s²; in float32 the
    # means came out off by 1e-2 to 0.13 and the variances by 0.15, silently
    g = torch.Generator().manual_seed(0)
    X = torch.rand(5, 2, generator=g)
    comp = torch.tensor([[0, 1], [1, 2], [2, 3], [3, 4], [4, 0]])
    lik = PairwiseProbitLikelihood(noise_std=noise_std)
    with pytest.raises(NumericalError, match="float64"):
        PairwiseEPGP(X, comp, likelihood=lik).posterior(X)
    # and so does a batch of such problems
    K = torch.stack([torch.eye(5), 0.5 * torch.eye(5) + 0.5])
    with pytest.raises(NumericalError, match="float32"):
        run_ep(torch.linalg.cholesky(K), comp, lik)
    # float64 holds them
    model = PairwiseEPGP(X.double(), comp, likelihood=lik)
    assert bool(model.ep_state.converged)


def test_float32_ep_refuses_small_noise_where_its_means_drift():
    # consistent-ish answers at noise 1e-3: float32 means were 3.6e-2 from
    # float64's (eps x site stiffness 7e5), without a word
    X, comp, _ = make_pairwise_data(20, 100, 2, noise_std=0.1, seed=2)
    lik = PairwiseProbitLikelihood(noise_std=1e-3)
    with pytest.raises(NumericalError, match=r"noise_std=0.001 pin"):
        PairwiseEPGP(X.float(), comp, likelihood=lik).posterior(X.float())
    # at noise 1e-2 it is taken and within 1e-2 of float64
    lik = PairwiseProbitLikelihood(noise_std=1e-2)
    m32 = PairwiseEPGP(X.float(), comp, likelihood=lik)
    m64 = PairwiseEPGP(X, comp, likelihood=lik)
    diff = m32.posterior(X.float()).mean.double() - m64.posterior(X).mean
    assert diff.abs().max() < 1e-2


@pytest.mark.parametrize("solver", [run_ep, find_mode])
def test_comparisons_on_another_device_are_named(solver):
    L = torch.eye(2, dtype=torch.float64)
    comps = torch.tensor([[0, 1]], device="meta")
    with pytest.raises(InputDataError, match=r"comparisons must be on chol_prior"):
        solver(L, comps, PairwiseProbitLikelihood())


@pytest.mark.parametrize("solver", [run_ep, find_mode])
def test_an_unknown_form_is_named(solver):
    L = torch.eye(2, dtype=torch.float64)
    with pytest.raises(InputDataError, match=r"form must be one of"):
        solver(L, torch.tensor([[0, 1]]), PairwiseProbitLikelihood(), form="bogus")
