import math
import warnings

import pytest
import torch
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    PairwiseBayesianActiveLearningByDisagreement,
    qExpectedUtilityOfBestOption,
)
from botorch.fit import fit_gpytorch_mll
from botorch.sampling import SobolQMCNormalSampler

import prefbo.models.ep as ep_module
from prefbo import PairwiseEPGP, PairwiseEPMLL, PairwiseLaplaceGP
from prefbo.exceptions import (
    ConvergenceWarning,
    InputDataError,
    InputTypeError,
    UnsupportedError,
)
from prefbo.likelihoods import PairwiseLogitLikelihood
from prefbo.utils.testing import make_pairwise_data, tolerance


def test_ep_model_fits_and_predicts(tkwargs):
    X, comp, u = make_pairwise_data(30, 80, **tkwargs)
    model = PairwiseEPGP(X, comp)
    fit_gpytorch_mll(PairwiseEPMLL(model.likelihood, model))
    Xt = torch.rand(4, 3, 2, **tkwargs)
    post = model.posterior(Xt)
    assert post.mean.shape == (4, 3, 1) and post.covariance_matrix.shape == (4, 3, 3)
    # the posterior mean orders the training designs like the true utility
    mean = model.posterior(X.unsqueeze(-2)).mean.reshape(-1)
    i, j = torch.triu_indices(30, 30, 1)
    agree = ((mean[i] - mean[j]) * (u[i] - u[j]) > 0).double().mean()
    assert agree > 0.8


def test_ep_training_state_matches_prediction_state():
    X, comp, _ = make_pairwise_data(25, 60, seed=4)
    model = PairwiseEPGP(X, comp)
    model.train()
    out = model(X)
    model.eval()
    torch.testing.assert_close(model.utility, out.mean, rtol=1e-5, atol=1e-6)


def test_ep_and_laplace_agree_when_answers_are_not_decisive():
    # large answer noise: the posterior is nearly Gaussian, EP ≈ Laplace
    X, comp, _ = make_pairwise_data(20, 40, seed=5, noise_std=3.0)
    from prefbo.likelihoods import PairwiseProbitLikelihood

    lik = PairwiseProbitLikelihood(noise_std=3.0)
    ep, lap = (
        PairwiseEPGP(X, comp, likelihood=lik),
        PairwiseLaplaceGP(X, comp, likelihood=lik),
    )
    Xt = torch.rand(6, 2, dtype=torch.float64)
    torch.testing.assert_close(
        ep.posterior(Xt).mean, lap.posterior(Xt).mean, rtol=0, atol=5e-3
    )


def test_ep_tracks_the_skewed_posterior_where_laplace_fails():
    """Decisive answers (prior sd of Δ ≈ 14, answer noise s = √2): the exact
    posterior of Δ = f1 - f0 by quadrature; EP is close, Laplace is not."""
    import math

    from gpytorch.kernels import RBFKernel, ScaleKernel
    from scipy import integrate, special

    X = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    k = ScaleKernel(RBFKernel()).double()
    k.outputscale, k.base_kernel.lengthscale = 100.0, 0.1
    v0 = (2 * k(X).to_dense()[0, 0] - 2 * k(X).to_dense()[0, 1]).item()
    comp = torch.tensor([[1, 0]] * 3)

    def post(d, j):
        return d**j * math.exp(
            -0.5 * d * d / v0 + 3 * special.log_ndtr(d / math.sqrt(2))
        )

    Z = integrate.quad(post, -80, 80, args=(0,), points=[0.0])[0]
    m1 = integrate.quad(post, -80, 80, args=(1,), points=[0.0])[0] / Z
    sd = math.sqrt(
        integrate.quad(post, -80, 80, args=(2,), points=[0.0])[0] / Z - m1**2
    )
    moments = {}
    for cls in (PairwiseLaplaceGP, PairwiseEPGP):
        post_f = cls(X, comp, covar_module=k).posterior(X)
        cov = post_f.covariance_matrix
        mean = post_f.mean.squeeze(-1)
        moments[cls] = (
            (mean[1] - mean[0]).item(),
            (cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]).sqrt().item(),
        )
    ep, lap = moments[PairwiseEPGP], moments[PairwiseLaplaceGP]
    assert ep[0] == pytest.approx(m1, rel=0.05) and ep[1] == pytest.approx(sd, rel=0.2)
    assert abs(lap[0] - m1) > 0.5 * m1  # Laplace's known failure
    assert abs(ep[1] - sd) < 0.5 * abs(lap[1] - sd)


def test_botorch_acquisitions_run_on_ep(tkwargs64):
    X, comp, _ = make_pairwise_data(20, 30, **tkwargs64)
    model = PairwiseEPGP(X, comp)
    cand = torch.rand(5, 2, 2, **tkwargs64)
    eubo = AnalyticExpectedUtilityOfBestOption(pref_model=model)(cand)
    q = qExpectedUtilityOfBestOption(
        pref_model=model, sampler=SobolQMCNormalSampler(torch.Size([256]), seed=0)
    )(cand)
    bald = PairwiseBayesianActiveLearningByDisagreement(pref_model=model)(cand)
    for v in (eubo, q, bald):
        assert v.shape == (5,) and torch.isfinite(v).all()
    torch.testing.assert_close(q, eubo, rtol=0, atol=tolerance(torch.float64, 0.1, 0.1))


def test_ep_requires_probit():
    X, comp, _ = make_pairwise_data(5, 5)
    with pytest.raises(UnsupportedError, match="PairwiseEPGP needs a probit"):
        PairwiseEPGP(X, comp, likelihood=PairwiseLogitLikelihood())


def test_warm_start_from_the_sites_of_fewer_answers():
    X, comp, _ = make_pairwise_data(30, 70, seed=5)
    first = PairwiseEPGP(X, comp[:60])
    assert first.last_sites is None  # nothing computed yet
    first.posterior(X[:2])
    sites = first.last_sites
    torch.testing.assert_close(sites.tau, first.ep_state.curvature)
    cold = PairwiseEPGP(X, comp)
    warm = PairwiseEPGP(X, comp)
    warm.warm_start(sites)
    assert warm.ep_state.iterations < cold.ep_state.iterations
    Xt = torch.rand(5, 2, dtype=torch.float64)
    pc, pw = cold.posterior(Xt), warm.posterior(Xt)
    torch.testing.assert_close(pw.mean, pc.mean, rtol=0, atol=1e-7)
    torch.testing.assert_close(
        pw.covariance_matrix, pc.covariance_matrix, rtol=0, atol=1e-7
    )
    # the previous model itself: its latest sites, the same start
    from_model = PairwiseEPGP(X, comp)
    from_model.warm_start(first)
    assert from_model.ep_state.iterations == warm.ep_state.iterations
    torch.testing.assert_close(
        from_model.ep_state.mode, warm.ep_state.mode, rtol=0, atol=0
    )
    untouched = PairwiseEPGP(X, comp)
    untouched.warm_start(PairwiseEPGP(X, comp[:60]))  # no EP run yet: no start
    assert untouched.last_sites is None
    with pytest.raises(InputDataError, match="previous must be a PairwiseEPGP, EPSi"):
        warm.warm_start(sites.tau)


def test_conditioned_ep_model_starts_at_the_current_sites():
    X, comp, _ = make_pairwise_data(30, 70, seed=6)
    model = PairwiseEPGP(X, comp)
    model.posterior(X[:1])
    Xnew = torch.tensor([[0.123, 0.456], [0.789, 0.012]], dtype=torch.float64)
    # a batch of 3 fantasy answers on the new pair, conditioned in one call
    Y = torch.tensor([[[1, 0]], [[0, 1]], [[1, 0]]])
    cond = model.condition_on_observations(Xnew.expand(3, 2, 2), Y)
    Xt = torch.rand(5, 2, dtype=torch.float64)
    for b in range(3):
        full = PairwiseEPGP(torch.cat([X, Xnew]), torch.cat([comp, Y[b] + 30]))
        torch.testing.assert_close(
            cond.posterior(Xt).mean[b], full.posterior(Xt).mean, rtol=0, atol=1e-7
        )
        assert cond.ep_state.iterations < full.ep_state.iterations
    assert model.n == 30 and cond.n == 32  # the original is untouched


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (
            {"max_iter": 0},
            InputDataError,
            r"max_iter must be an int >= 1; got max_iter=0\.",
        ),
        (
            {"max_iter": 2.5},
            InputTypeError,
            r"max_iter must be an int >= 1; got float 2\.5\.",
        ),
        ({"maxfev": 0}, InputDataError, r"maxfev must be an int >= 1; got maxfev=0\."),
        (
            {"tol": -1.0},
            InputDataError,
            r"tol must be None or a finite float >= 0; got tol=-1\.0\.",
        ),
        (
            {"xtol": math.inf},
            InputDataError,
            r"xtol must be None or a finite float >= 0; got xtol=inf",
        ),
        (
            {"fit_tol": -1.0},
            InputDataError,
            r"fit_tol must be None or a finite float >= 0; got fit_tol=-1",
        ),
        (
            {"fit_tol": math.nan},
            InputDataError,
            r"fit_tol must be None or a finite float >= 0; got fit_tol=nan",
        ),
        (
            {"damping": 2.0},
            InputDataError,
            r"damping must be None or a float in \(0, 1\]; got damping=2\.0\.",
        ),
        (
            {"anderson_memory": -1},
            InputDataError,
            r"anderson_memory must be an int >= 0; got anderson_memory=-1",
        ),
    ],
)
def test_ep_options_are_checked_at_construction(kwargs, error, message):
    X, comp, _ = make_pairwise_data(5, 5)
    with pytest.raises(error, match=message):
        PairwiseEPGP(X, comp, **kwargs)


def test_zero_fit_tol_is_used_not_replaced_by_the_default(monkeypatch):
    """fit_tol=0.0 reaches EP (it used to be replaced by the default 1e-6)."""
    seen = []
    real = ep_module.ep_evidence

    def recording(*args, **options):
        seen.append(options["tol"])
        return real(*args, **options)

    monkeypatch.setattr(ep_module, "ep_evidence", recording)
    X, comp, _ = make_pairwise_data(6, 5, seed=1)
    for fit_tol, expected in ((0.0, 0.0), (None, 1e-6), (1e-3, 1e-3)):
        model = PairwiseEPGP(X, comp, fit_tol=fit_tol, max_iter=30)
        model.train()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # tol=0: budget
            model(X)
        assert seen[-1] == expected
