import math

import pytest
import torch
from botorch.acquisition.preference import PairwiseBayesianActiveLearningByDisagreement
from scipy import integrate, special

from prefbo.acquisition import PairwiseBALD
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.likelihoods.pairwise import (
    PairwiseLogitLikelihood,
    PairwiseProbitLikelihood,
)
from prefbo.models import PairwiseLaplaceGP


def _data(n=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=torch.float64)
    u = -((X - 0.4) ** 2).sum(-1)
    pairs = torch.combinations(torch.arange(n))[:14]
    better = u[pairs[:, 0]] > u[pairs[:, 1]]
    comps = torch.where(better.unsqueeze(-1), pairs, pairs.flip(-1))
    return X, comps


def _reference(kind, s, mu, v):
    r"""``H(E[p]) - E[H(p)]`` by adaptive quadrature (scipy) in ``z = Δ/s``."""

    def log_f(z):
        return special.log_ndtr(z) if kind == "probit" else -math.log1p(math.exp(-z))

    def entropy(z):
        lp, lq = log_f(z), log_f(-z)
        return -(math.exp(lp) * lp + math.exp(lq) * lq)

    mz, sz = mu / s, math.sqrt(v) / s

    def density(z):
        return math.exp(-0.5 * ((z - mz) / sz) ** 2) / (sz * math.sqrt(2 * math.pi))

    lo, hi = max(mz - 12 * sz, -45.0), min(mz + 12 * sz, 45.0)
    points = [p for p in (mz, 0.0) if lo < p < hi]
    opts = dict(points=points or None, limit=500, epsabs=1e-15, epsrel=1e-12)
    e_h = integrate.quad(lambda z: density(z) * entropy(z), lo, hi, **opts)[0]
    e_p = integrate.quad(lambda z: density(z) * math.exp(log_f(z)), lo, hi, **opts)[0]
    e_p += special.ndtr((mz - hi) / sz)  # the mass above hi, where F = 1
    return -(e_p * math.log(e_p) + (1 - e_p) * math.log1p(-e_p)) - e_h


@pytest.mark.parametrize("kind", ["probit", "logit"])
@pytest.mark.parametrize("sigma", [1.0, 0.05, 3.0])
def test_information_matches_adaptive_quadrature(kind, sigma):
    lik = (PairwiseProbitLikelihood if kind == "probit" else PairwiseLogitLikelihood)(
        sigma
    )
    X, comps = _data()
    acqf = PairwiseBALD(PairwiseLaplaceGP(X, comps, likelihood=lik).eval())
    cases = [(0.0, 1.0), (1.0, 0.5), (3.0, 4.0), (0.2, 1e-4), (-20.0, 100.0)]
    cases += [(0.5, 1e-2), (0.0, 400.0)]  # wide: sd/s up to 400
    mu = torch.tensor([c[0] for c in cases], dtype=torch.float64)
    var = torch.tensor([c[1] for c in cases], dtype=torch.float64)
    got = acqf.information(mu, var)
    expected = torch.tensor([_reference(kind, lik.scale, m, v) for m, v in cases])
    torch.testing.assert_close(got, expected.to(got), rtol=1e-7, atol=1e-9)
    # no posterior uncertainty: nothing to learn
    zero = acqf.information(mu, torch.zeros_like(var))
    torch.testing.assert_close(zero, torch.zeros_like(zero), rtol=0, atol=1e-15)


def test_on_a_model_it_is_the_information_of_its_posterior_and_has_gradients():
    X, comps = _data()
    model = PairwiseLaplaceGP(X, comps).eval()
    acqf = PairwiseBALD(model)
    Q = torch.rand(
        5, 2, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1)
    )
    post = model.posterior(Q)
    mean, cov = post.mean.squeeze(-1), post.covariance_matrix
    var = cov[..., 0, 0] + cov[..., 1, 1] - 2 * cov[..., 0, 1]
    torch.testing.assert_close(
        acqf(Q), acqf.information(mean[..., 0] - mean[..., 1], var), rtol=1e-9, atol=0
    )
    assert torch.autograd.gradcheck(lambda x: acqf(x), (Q.clone().requires_grad_(),))


def test_botorch_bald_is_the_special_case_of_unit_scale():
    # BoTorch's class assumes Φ(Δ) (s = 1): on a model whose answers have
    # s = 1 the two agree up to BoTorch's Monte Carlo error; under the default
    # s = √2 they differ by far more than that error
    X, comps = _data()
    Q = torch.rand(
        6, 2, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2)
    )
    unit = PairwiseLaplaceGP(
        X, comps, likelihood=PairwiseProbitLikelihood(1 / math.sqrt(2))
    ).eval()
    torch.manual_seed(0)
    theirs = PairwiseBayesianActiveLearningByDisagreement(unit, num_samples=2**17)(Q)
    torch.testing.assert_close(
        PairwiseBALD(unit)(Q), theirs.detach(), rtol=0, atol=2e-3
    )
    default = PairwiseLaplaceGP(X, comps).eval()
    torch.manual_seed(0)
    theirs = PairwiseBayesianActiveLearningByDisagreement(default, num_samples=2**17)(Q)
    assert (PairwiseBALD(default)(Q) - theirs.detach()).abs().max() > 1e-2


@pytest.mark.parametrize("kind", ["probit", "logit"])
def test_gradients_are_finite_where_the_pair_collapses(kind):
    # a design against itself (var = 0) and against a near copy: BoTorch's
    # L-BFGS-B stops with "NaN in gradf" on a NaN gradient
    lik = PairwiseProbitLikelihood() if kind == "probit" else PairwiseLogitLikelihood()
    X, comps = _data()
    acqf = PairwiseBALD(PairwiseLaplaceGP(X, comps, likelihood=lik).eval())
    x = torch.tensor([[0.3, 0.6]], dtype=torch.float64)
    Q = torch.stack([torch.cat([x, x]), torch.cat([x, x + 1e-9])])
    Q.requires_grad_(True)
    value = acqf(Q)
    (grad,) = torch.autograd.grad(value.sum(), Q)
    assert torch.isfinite(grad).all() and torch.isfinite(value).all()
    assert value[0].item() == 0.0 and value[1].item() < 1e-12
    # far-apart means: E[p] rounds to 0 or 1, still finite
    mu = torch.tensor([80.0, -80.0], dtype=torch.float64, requires_grad=True)
    var = torch.tensor([1e-3, 1e-3], dtype=torch.float64, requires_grad=True)
    big = acqf.information(mu, var)
    grads = torch.autograd.grad(big.sum(), [mu, var])
    assert torch.isfinite(big).all() and all(torch.isfinite(g).all() for g in grads)


def test_errors_are_named():
    X, comps = _data()
    model = PairwiseLaplaceGP(X, comps).eval()
    with pytest.raises(InputDataError, match=r"num_points must be an odd int >= 33"):
        PairwiseBALD(model, num_points=64)
    with pytest.raises(
        InputDataError, match=r"num_points must be an odd int >= 33; got num_points=31"
    ):
        PairwiseBALD(model, num_points=31)
    with pytest.raises(InputTypeError, match=r"num_points must be an int; got float"):
        PairwiseBALD(model, num_points=65.0)

    class NoLikelihood(torch.nn.Module):
        num_outputs = 1

    with pytest.raises(UnsupportedError, match=r"pairwise answer likelihood"):
        PairwiseBALD(NoLikelihood())


@pytest.mark.parametrize("q", [1, 3])
def test_q_other_than_two_is_a_typed_error(q):
    X, comps = _data()
    acqf = PairwiseBALD(PairwiseLaplaceGP(X, comps))
    with pytest.raises(UnsupportedError, match=f"q=2.*shape \\(4, {q}, 2\\)"):
        acqf(torch.rand(4, q, 2, dtype=torch.float64))
    X_nan = torch.rand(4, 2, 2, dtype=torch.float64)
    X_nan[3, 0, 1] = float("nan")
    with pytest.raises(InputDataError, match=r"X must be finite.*row \(3, 0\)"):
        acqf(X_nan)


@pytest.mark.parametrize(
    "X, error, message",
    [
        (torch.rand(5, 2, 3, dtype=torch.float64), InputDataError, r"d=2 features"),
        (torch.rand(5, 2, 2), InputTypeError, r"model's dtype torch.float64"),
        (torch.rand(5, 2, 2).half(), InputTypeError, r"model's dtype torch.float64"),
        (torch.ones(5, 2, 2, dtype=torch.long), InputTypeError, r"real tensor"),
    ],
)
def test_questions_of_the_wrong_width_or_dtype_are_typed_errors(X, error, message):
    # as FastAnalyticEUBO: torch's broadcasting error, or silently cast values
    # (integer designs gave all-zero BALD) before
    Xt, comps = _data()
    acqf = PairwiseBALD(PairwiseLaplaceGP(Xt, comps).eval())
    with pytest.raises(error, match=message):
        acqf(X)
