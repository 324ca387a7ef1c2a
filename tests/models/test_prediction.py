import math
import warnings

import pytest
import torch
from linear_operator.utils.warnings import NumericalWarning

from prefbo import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.models.prediction import centring_matrix, check_noise, check_test_points
from prefbo.utils.testing import make_pairwise_data


def test_observation_noise_adds_utility_variance():
    X, comp = make_pairwise_data(20, 30)[:2]
    model = PairwiseLaplaceGP(X, comp)
    Xt = torch.rand(3, 2, dtype=torch.float64)
    plain = model.posterior(Xt).covariance_matrix
    noisy = model.posterior(Xt, observation_noise=True).covariance_matrix
    torch.testing.assert_close(noisy - plain, torch.eye(3, dtype=torch.float64))


def test_predict_preference_matches_monte_carlo(tkwargs64):
    X, comp = make_pairwise_data(20, 30, **tkwargs64)[:2]
    model = PairwiseLaplaceGP(X, comp)
    X1, X2 = torch.rand(2, 4, 2, **tkwargs64).unbind(0)
    p = model.predict_preference(X1, X2)
    assert p.shape == (4,)
    torch.testing.assert_close(p + model.predict_preference(X2, X1), torch.ones_like(p))
    # independent: sample utilities jointly, then answers by the probit
    samples = (
        model.posterior(torch.stack([X1, X2], -2))
        .rsample(torch.Size([200_000]))
        .squeeze(-1)
    )  # S x 4 x 2
    mc = torch.special.ndtr((samples[..., 0] - samples[..., 1]) / math.sqrt(2)).mean(0)
    torch.testing.assert_close(p, mc, rtol=0, atol=5e-3)


def test_centred_posterior():
    X, comp = make_pairwise_data(20, 30)[:2]
    model = PairwiseLaplaceGP(X, comp)
    post = model.centred_posterior(model.datapoints)
    assert post.mean.sum().abs().item() < 1e-8  # centred over the reference
    Xt = torch.rand(3, 2, dtype=torch.float64)
    joint = model.posterior(torch.cat([Xt, model.datapoints]))
    with warnings.catch_warnings():  # the joint covariance is near-singular
        warnings.simplefilter("ignore", NumericalWarning)
        samples = joint.rsample(torch.Size([100_000])).squeeze(-1)
    centred = samples[:, :3] - samples[:, 3:].mean(-1, keepdim=True)
    cp = model.centred_posterior(Xt)
    torch.testing.assert_close(cp.mean.squeeze(-1), centred.mean(0), rtol=0, atol=2e-2)
    torch.testing.assert_close(
        cp.variance.squeeze(-1), centred.var(0), rtol=3e-2, atol=1e-3
    )
    # centring removes the unidentified level: the band is narrower
    assert (cp.variance < model.posterior(Xt).variance).all()


def test_centring_matrix_subtracts_the_weighted_reference_mean():
    w = torch.tensor([0.25, 0.75], dtype=torch.float64)
    T = centring_matrix(2, w)
    g = torch.tensor([1.0, 2.0, 4.0, 8.0], dtype=torch.float64)
    torch.testing.assert_close(T @ g, torch.tensor([1.0, 2.0]).double() - 7.0)


def test_test_point_and_noise_checks_name_what_came():
    with pytest.raises(InputTypeError, match="X must be a floating torch.Tensor"):
        check_test_points(torch.zeros(2, 2, dtype=torch.long), "X", 2, None)
    with pytest.raises(InputDataError, match="d=3 features"):
        check_test_points(torch.zeros(2, 2), "X", 3, None)
    with pytest.raises(InputDataError, match="finite variances >= 0"):
        check_noise(torch.tensor([-1.0]), torch.Size([3]))
    with pytest.raises(InputDataError, match=r"broadcast to batch_shape x q = \(3,\)"):
        check_noise(torch.ones(2), torch.Size([3]))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_check_test_points_names_the_non_finite_row(bad):
    X = torch.rand(2, 3, 2, dtype=torch.float64)
    X[1, 2, 0] = bad
    with pytest.raises(InputDataError, match=r"X must be finite.*row \(1, 2\)"):
        check_test_points(X, "X", 2, torch.float64)


@pytest.mark.parametrize("cls", [PairwiseLaplaceGP, PairwiseEPGP])
def test_posterior_at_nan_points_is_an_error_not_nan(cls):
    X, comp = make_pairwise_data(10, 15)[:2]
    model = cls(X, comp)
    Xt = torch.rand(4, 2, dtype=torch.float64)
    Xt[3, 1] = math.nan
    with pytest.raises(InputDataError, match=r"X must be finite.*row \(3,\)"):
        model.posterior(Xt)
    with pytest.raises(InputDataError, match="X2 must be finite"):
        model.predict_preference(Xt[:2], Xt[2:])


def _exact_laplace_variance(model, X, sigma_design):
    r"""Predictive variances at ``X`` for a covariance ``sigma_design`` of the
    utilities at the training designs (float64, plain linear algebra)."""
    Xtr = model.datapoints
    Kt = model._train_covariance(Xtr).detach()
    Ks = model.covar_module(X, Xtr).to_dense().detach()
    Kss = model.covar_module(X).to_dense().detach()
    B = torch.linalg.solve(Kt, Ks.T)  # Kt⁻¹ k*
    cov = Kss - Ks @ B + B.T @ sigma_design @ B
    return cov.diagonal()


@pytest.mark.parametrize("noise_std", [1e-6, 1e-8, 3e-9, 1e-10, 1e-30])
def test_laplace_variance_at_tiny_noise_for_contradicting_answers(noise_std):
    # [0, 1] and [1, 0] contradict each other: by symmetry the mode is f = 0
    # with both differences z = 0, so the curvature is 2 ω(0) / s² -> inf and
    # the Laplace covariance tends to K conditioned on f0 = f1 (formerly the
    # formed I + Lᵀ W L lost the prior: 1.031 at 1e-8, above the prior 1)
    torch.manual_seed(0)
    X = torch.rand(2, 2, dtype=torch.float64)
    model = PairwiseLaplaceGP(
        X,
        torch.tensor([[0, 1], [1, 0]]),
        likelihood=PairwiseProbitLikelihood(noise_std=noise_std),
    )
    var = model.posterior(X).variance.detach().squeeze(-1)
    prior = model.covar_module(X).to_dense().diagonal().detach()
    assert bool((var >= 0).all()) and bool((var <= prior).all())
    Kt = model._train_covariance(X).detach()
    d = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    limit = Kt - Kt @ d.T @ d @ Kt / (d @ Kt @ d.T)
    torch.testing.assert_close(
        var, _exact_laplace_variance(model, X, limit), rtol=1e-8, atol=1e-10
    )
    assert float(model.posterior(X).mean.detach().abs().max()) < 1e-6


def test_laplace_variance_at_tiny_noise_on_a_consistent_chain():
    # 0 ≻ 1 ≻ … ≻ 7: as s -> 0 the mode's differences shrink like s·z with
    # z ~ √(log 1/s), the curvature ω(z)/s² grows without bound and the
    # covariance at the designs tends to 1 1ᵀ / (1ᵀ K⁻¹ 1) (all differences
    # pinned); the variances decrease towards that limit, inside [0, prior]
    # (formerly 8.9e-5 at 1e-10, and a crash below)
    n = 8
    X = torch.linspace(0, 1, n, dtype=torch.float64).unsqueeze(-1)
    comps = torch.tensor([[i, i + 1] for i in range(n - 1)])
    variances = []
    for noise_std in (1e-4, 1e-6, 1e-8, 1e-10, 1e-14, 1e-30):
        model = PairwiseLaplaceGP(
            X, comps, likelihood=PairwiseProbitLikelihood(noise_std=noise_std)
        )
        variances.append(model.posterior(X).variance.detach().squeeze(-1))
    one = torch.ones(n, 1, dtype=torch.float64)
    Kt = model._train_covariance(X).detach()
    limit = _exact_laplace_variance(
        model, X, one @ one.T / (one.T @ torch.linalg.solve(Kt, one))
    )
    prior = model.covar_module(X).to_dense().diagonal().detach()
    for v in variances:
        assert bool((v <= prior).all()) and bool((v >= limit - 1e-9).all())
    for coarse, fine in zip(variances, variances[1:]):
        assert bool((fine <= coarse + 1e-9).all())
    torch.testing.assert_close(variances[-1], limit, rtol=1e-7, atol=1e-10)
    torch.testing.assert_close(variances[-2], limit, rtol=1e-5, atol=1e-10)
