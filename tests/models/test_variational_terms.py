import math

import pytest
import torch

from prefbo import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.data import PairwiseComparisons, Rankings
from prefbo.exceptions import InputDataError
from prefbo.fit import fit_variational
from prefbo.likelihoods import (
    JustNoticeableDifferenceLikelihood,
    PairwiseLogitLikelihood,
    PairwiseProbitLikelihood,
    PseudoRationalChoiceLikelihood,
    latent_moments,
    pairwise_expected_log_prob,
)
from prefbo.likelihoods.quadrature import distribution_moments
from prefbo.models.variational import VariationalPreferenceGP
from prefbo.models.variational_terms import data_inputs
from prefbo.utils.testing import make_pairwise_data, tolerance


def _dense_answer_moments(model, data):
    r"""GPyTorch's own q(f) at all designs (eval mode: full covariance), gathered."""
    lik = model.likelihood
    X = data.datapoints
    model.eval()
    q = model(X)
    mean, cov = distribution_moments(q)
    if mean.ndim == 1:
        mean = mean.unsqueeze(-1)  # n x 1
    index = lik._index(X.shape[-2], model.num_outputs, *data.answers)
    return latent_moments(mean, cov, index.designs, index.outputs, index.mask), index


@pytest.mark.parametrize("coregionalization", ["independent", "lmc"])
def test_answer_moments_equal_gpytorch_dense_q(
    tkwargs, coregionalization, choice_data, perturb_q_u
):
    data = choice_data(**tkwargs)
    model = VariationalPreferenceGP(
        data,
        PseudoRationalChoiceLikelihood(),
        num_utilities=2,
        inducing_points=7,
        coregionalization=coregionalization,
    )
    perturb_q_u(model)
    with torch.no_grad():
        (m_ref, c_ref), index = _dense_answer_moments(model, data)
        m, c = model.answer_moments(
            data.datapoints, index.designs, index.outputs, index.mask
        )
    tol = tolerance(tkwargs["dtype"], 1e-10, 1e-4)
    assert c.shape == (16, 6, 6)
    torch.testing.assert_close(m, m_ref, rtol=tol, atol=tol)
    torch.testing.assert_close(c, c_ref, rtol=tol, atol=tol)


def test_answer_moments_single_utility_pairs(tkwargs, perturb_q_u):
    X, comp, _ = make_pairwise_data(15, 30, **tkwargs)
    model = VariationalPreferenceGP(PairwiseComparisons(X, comp), inducing_points=6)
    perturb_q_u(model, seed=1)
    model.eval()
    with torch.no_grad():
        q = model(X)
        zeros = torch.zeros_like(comp)
        m_ref, c_ref = latent_moments(
            q.mean.unsqueeze(-1), q.covariance_matrix, comp, zeros
        )
        m, c = model.answer_moments(X, comp, zeros)
    tol = tolerance(tkwargs["dtype"], 1e-10, 1e-4)
    torch.testing.assert_close(m, m_ref, rtol=tol, atol=tol)
    torch.testing.assert_close(c, c_ref, rtol=tol, atol=tol)


def _mc_elbo(model, data, num=40_000, seed=0):
    r"""Independent ELBO: E_q[log p] from samples of GPyTorch's dense q(f) plus
    the closed-form KL of the whitened q(u) = N(m, S) from N(0, I)."""
    model.eval()
    q = model(data.datapoints)
    mean, cov = distribution_moments(q)  # n·t flattened design-major if t > 1
    flat = mean.reshape(-1)
    chol = torch.linalg.cholesky(cov)
    g = torch.Generator().manual_seed(seed)
    eps = torch.randn(num, flat.shape[0], generator=g, dtype=flat.dtype)
    f = (flat + eps @ chol.T).reshape(num, *mean.shape)  # num x n [x t]
    lik = model.likelihood
    if isinstance(lik, PairwiseProbitLikelihood):
        (comp,) = data.answers
        delta = f[:, comp[:, 0]] - f[:, comp[:, 1]]  # num x m
        logp = torch.special.log_ndtr(delta / lik.scale).sum(-1)
    else:
        logp = lik.log_prob_answers(f, *data.answers).sum(-1)  # num
    q_u = model.base_variational_strategy.variational_distribution
    m, S = q_u.mean, q_u.covariance_matrix  # [Q x] M, [Q x] M x M
    M = m.shape[-1]
    kl = (
        0.5
        * (
            S.diagonal(dim1=-2, dim2=-1).sum(-1) + (m * m).sum(-1) - M - torch.logdet(S)
        ).sum()
    )
    return logp.mean() - kl, logp.std() / math.sqrt(num)


@pytest.mark.parametrize("case", ["probit", "pseudo_rational"])
def test_elbo_equals_monte_carlo(case, choice_data, perturb_q_u):
    if case == "probit":
        X, comp, _ = make_pairwise_data(10, 25, seed=2)
        data, lik, t = PairwiseComparisons(X, comp), None, 1
    else:
        data, lik, t = choice_data(), PseudoRationalChoiceLikelihood(), 2
    model = VariationalPreferenceGP(data, lik, num_utilities=t, inducing_points=6)
    perturb_q_u(model, seed=3)
    with torch.no_grad():
        ours = model.elbo(num_samples=4096)  # QMC error ≪ MC error (choice)
        mc, se = _mc_elbo(model, data)
    # QMC (choice) / Gauss–Hermite (pairs) vs plain Monte Carlo: within 4 SE
    assert abs(float(ours - mc)) < 4 * float(se) + 1e-3, (float(ours), float(mc), se)


def test_elbo_optimum_is_close_to_ep():
    r"""Inducing points = all designs, full-rank whitened q: the ELBO optimum
    is the best Gaussian in KL(q ‖ p). For the probit posterior it matches EP
    (moment matching, KL(p ‖ q) site-wise) closely and beats Laplace (a
    Gaussian at the mode), which misses the skew. Tolerances are loose because
    VI and EP are different approximations: on this decisive problem they agree
    to ~0.01 in the centred means and ~3% in the centred variances."""
    X, comp, _ = make_pairwise_data(8, 30, d=1, seed=3, noise_std=0.3)
    ep, lap = PairwiseEPGP(X, comp), PairwiseLaplaceGP(X, comp)
    for model in (ep, lap):
        model.covar_module.outputscale = 9.0
        model.covar_module.base_kernel.lengthscale = 0.3
    vi = VariationalPreferenceGP(
        PairwiseComparisons(X, comp), inducing_points=X, learn_inducing_points=False
    )
    vi.covar_module.load_state_dict(ep.covar_module.state_dict())
    fit_variational(
        vi,
        batch_size=100,
        epochs=400,
        lr=0.08,
        learn_hyperparameters=False,
        early_stopping_patience=None,
    )
    centre = torch.eye(8, dtype=torch.float64) - 1 / 8  # what comparisons measure
    moments = {}
    for name, model in (("ep", ep), ("lap", lap), ("vi", vi)):
        with torch.no_grad():
            post = model.posterior(X)
            mean = centre @ post.mean.squeeze(-1)
            var = (centre @ post.covariance_matrix @ centre).diagonal()
        moments[name] = (mean, var)
    (m_ep, v_ep), (m_lap, _), (m_vi, v_vi) = (moments[k] for k in ("ep", "lap", "vi"))
    assert (m_ep.abs().max()) > 1.0  # decisive answers: a skewed posterior
    torch.testing.assert_close(m_vi, m_ep, rtol=0, atol=0.05)
    torch.testing.assert_close(v_vi, v_ep, rtol=0.1, atol=0.005)
    assert (m_vi - m_ep).abs().max() < (m_lap - m_ep).abs().max()


def test_set_inducing_distribution_gives_q_u_exactly():
    X, comp, _ = make_pairwise_data(12, 30, seed=5)
    model = VariationalPreferenceGP(PairwiseComparisons(X, comp), inducing_points=8)
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(8, generator=g, dtype=torch.float64)
    A = torch.randn(8, 8, generator=g, dtype=torch.float64)
    cov = 0.1 * A @ A.T + 0.05 * torch.eye(8, dtype=torch.float64)
    model.set_inducing_distribution(mean, cov)
    strategy = model.base_variational_strategy
    Z = strategy.inducing_points
    with torch.no_grad():
        # u = L v with K_ZZ + jitter = L Lᵀ and v ~ q(v), GPyTorch's whitening
        K = model.covar_module(Z).add_jitter(strategy.jitter_val).to_dense()
        L = torch.linalg.cholesky(K)
        q_v = strategy.variational_distribution
        torch.testing.assert_close(L @ q_v.mean, mean)
        torch.testing.assert_close(L @ q_v.covariance_matrix @ L.T, cov)
        model.eval()
        post = model.posterior(Z)  # q(f) at Z, up to GPyTorch's jitter
    torch.testing.assert_close(post.mean.squeeze(-1), mean, rtol=0, atol=2e-3)
    with pytest.raises(InputDataError, match=r"mean must be \[8\] and covariance"):
        model.set_inducing_distribution(mean[:3], cov)


def test_non_finite_q_u_is_rejected():
    X, comp, _ = make_pairwise_data(10, 20)
    data = PairwiseComparisons(X, comp)
    Z = torch.rand(4, 2, dtype=torch.float64)
    model = VariationalPreferenceGP(data, inducing_points=Z)
    q_u = model.base_variational_strategy._variational_distribution
    before = (q_u.variational_mean.clone(), q_u.chol_variational_covar.clone())
    mean, cov = torch.zeros(4, dtype=torch.float64), torch.eye(4, dtype=torch.float64)
    bad_mean, bad_cov = mean.clone(), cov.clone()
    bad_mean[3] = math.nan
    bad_cov[0, 1] = bad_cov[1, 0] = math.inf
    with pytest.raises(
        InputDataError, match=r"mean must be finite; got 1 NaN .*\(first at \(3,\)\)"
    ):
        model.set_inducing_distribution(bad_mean, cov)
    with pytest.raises(
        InputDataError,
        match=r"covariance must be finite; got 2 NaN .*\(first at \(0, 1\)\)",
    ):
        model.set_inducing_distribution(mean, bad_cov)
    # nothing was stored
    assert torch.equal(q_u.variational_mean, before[0])
    assert torch.equal(q_u.chol_variational_covar, before[1])


@pytest.mark.parametrize("sigma", [1.0, 0.1])
def test_predictive_log_prob_is_the_closed_form_for_probit_pairs_and_jnd(sigma):
    # log E_q[Φ((Δ - δ)/s)] = log Φ((μ - δ)/√(s² + v)): exact, also where the
    # difference's sd is many times s (where Gauss–Hermite is not)
    X = torch.rand(
        8, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)
    )
    comps = torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7], [1, 0], [3, 2]])
    data = PairwiseComparisons(X, comps)
    for lik, delta in (
        (PairwiseProbitLikelihood(noise_std=sigma), 0.0),
        (JustNoticeableDifferenceLikelihood(threshold=0.2, noise_std=sigma), 0.2),
    ):
        model = VariationalPreferenceGP(data, likelihood=lik, inducing_points=X.clone())
        model.eval()
        with torch.no_grad():
            Z = model.base_variational_strategy.inducing_points
            K = model.covar_module(Z).to_dense()
            model.set_inducing_distribution(torch.linspace(-3, 3, 8).double(), K)
            got = model.predictive_log_prob(data)
            mean, cov = model.answer_moments(X, comps, torch.zeros_like(comps))
        md = mean[:, 0] - mean[:, 1]
        vd = cov[:, 0, 0] + cov[:, 1, 1] - 2 * cov[:, 0, 1]
        exact = torch.special.log_ndtr((md - delta) / (lik.scale**2 + vd).sqrt())
        torch.testing.assert_close(got, exact, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("cls", [PairwiseProbitLikelihood, PairwiseLogitLikelihood])
def test_pairwise_terms_are_the_difference_quadratures(cls, perturb_q_u):
    r"""Pairwise answers: Gauss–Hermite over each difference's q marginal for
    the ELBO, the likelihood's predictive probability for the log marginal."""
    X, comp, _ = make_pairwise_data(12, 30, seed=6)
    data = PairwiseComparisons(X, comp)
    lik = cls(noise_std=0.4)
    model = VariationalPreferenceGP(data, lik, inducing_points=6)
    perturb_q_u(model, seed=2)
    with torch.no_grad():
        mean, cov = model.answer_moments(X, comp, torch.zeros_like(comp))
        mean_diff = mean[:, 0] - mean[:, 1]
        var_diff = cov[:, 0, 0] + cov[:, 1, 1] - 2.0 * cov[:, 0, 1]
        ell = model.expected_log_likelihood(data)
        marginal = model.predictive_log_prob(data)
    assert torch.equal(ell, pairwise_expected_log_prob(lik, mean_diff, var_diff))
    assert torch.equal(
        marginal, lik.log_predictive_probability(mean_diff, var_diff.clamp_min(0))
    )


def test_data_inputs_are_designs_or_contexts():
    X, comp, _ = make_pairwise_data(6, 8)
    assert data_inputs(PairwiseComparisons(X, comp)) is X
    features = torch.rand(3, 2, dtype=torch.float64)
    ranks = Rankings(features, [[0, 1], [1, 0], [0, 1]], num_labels=2)
    assert data_inputs(ranks) is features
