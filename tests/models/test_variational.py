import math

import pytest
import torch
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    qExpectedUtilityOfBestOption,
)
from botorch.models.likelihoods.pairwise import (
    PairwiseLogitLikelihood as BoTorchLogit,
)
from botorch.posteriors.gpytorch import GPyTorchPosterior
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.kernels import RBFKernel
from gpytorch.means import ConstantMean

from prefbo import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.data import ChoiceSets, PairwiseComparisons, Rankings
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.fit import fit_variational
from prefbo.inducing import ConditionalVarianceReduction, KMeans, RandomSubset
from prefbo.likelihoods import (
    JustNoticeableDifferenceLikelihood,
    PairwiseLogitLikelihood,
    PairwiseProbitLikelihood,
    PlackettLuceLikelihood,
    PseudoRationalChoiceLikelihood,
    latent_moments,
)
from prefbo.likelihoods.quadrature import distribution_moments
from prefbo.models.variational import VariationalPreferenceGP
from prefbo.utils.testing import make_pairwise_data, tolerance


def _choice_data(n=12, k=16, seed=0, **tkwargs):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=torch.float64).to(**tkwargs)
    sets = torch.stack([torch.randperm(n, generator=g)[:3] for _ in range(k)])
    sets[::4, 2] = -1  # ragged sets
    chosen = torch.zeros(k, 3, dtype=torch.bool)
    chosen[:, 0] = True
    chosen[1::4, 1] = True  # two chosen options
    return ChoiceSets(X, sets.to(X.device), chosen.to(X.device))


def _perturb(model, seed=0, scale=0.5):
    r"""A non-trivial q(u): random whitened mean and Cholesky factor."""
    g = torch.Generator().manual_seed(seed)
    q_u = model.base_variational_strategy._variational_distribution
    with torch.no_grad():
        mean, chol = q_u.variational_mean, q_u.chol_variational_covar
        mean.copy_(torch.randn(mean.shape, generator=g, dtype=torch.float64))
        noise = torch.randn(chol.shape, generator=g, dtype=torch.float64).tril(-1)
        eye = torch.eye(chol.shape[-1], dtype=torch.float64)
        chol.copy_(scale * eye + 0.2 * noise)


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
def test_answer_moments_equal_gpytorch_dense_q(tkwargs, coregionalization):
    data = _choice_data(**tkwargs)
    model = VariationalPreferenceGP(
        data,
        PseudoRationalChoiceLikelihood(),
        num_utilities=2,
        inducing_points=7,
        coregionalization=coregionalization,
    )
    _perturb(model)
    with torch.no_grad():
        (m_ref, c_ref), index = _dense_answer_moments(model, data)
        m, c = model.answer_moments(
            data.datapoints, index.designs, index.outputs, index.mask
        )
    tol = tolerance(tkwargs["dtype"], 1e-10, 1e-4)
    assert c.shape == (16, 6, 6)
    torch.testing.assert_close(m, m_ref, rtol=tol, atol=tol)
    torch.testing.assert_close(c, c_ref, rtol=tol, atol=tol)


def test_answer_moments_single_utility_pairs(tkwargs):
    X, comp, _ = make_pairwise_data(15, 30, **tkwargs)
    model = VariationalPreferenceGP(PairwiseComparisons(X, comp), inducing_points=6)
    _perturb(model, seed=1)
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
def test_elbo_equals_monte_carlo(case):
    if case == "probit":
        X, comp, _ = make_pairwise_data(10, 25, seed=2)
        data, lik, t = PairwiseComparisons(X, comp), None, 1
    else:
        data, lik, t = _choice_data(), PseudoRationalChoiceLikelihood(), 2
    model = VariationalPreferenceGP(data, lik, num_utilities=t, inducing_points=6)
    _perturb(model, seed=3)
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


def test_posterior_runs_botorch_eubo_and_qeubo(tkwargs):
    X, comp, _ = make_pairwise_data(20, 40, **tkwargs)
    model = VariationalPreferenceGP(PairwiseComparisons(X, comp), inducing_points=10)
    fit_variational(model, batch_size=20, epochs=3, seed=0)
    Xt = torch.rand(5, 2, 2, **tkwargs)
    post = model.posterior(Xt)
    assert isinstance(post, GPyTorchPosterior)
    assert post.mean.shape == (5, 2, 1) and post.covariance_matrix.shape == (5, 2, 2)
    eubo = AnalyticExpectedUtilityOfBestOption(pref_model=model)(Xt)
    assert eubo.shape == (5,) and torch.isfinite(eubo).all()
    qeubo = qExpectedUtilityOfBestOption(
        pref_model=model, sampler=SobolQMCNormalSampler(torch.Size([64]), seed=0)
    )(torch.rand(4, 3, 2, **tkwargs))
    assert qeubo.shape == (4,) and torch.isfinite(qeubo).all()
    # EUBO of a pair ≥ the larger posterior mean (E max ≥ max E)
    assert (eubo >= post.mean.squeeze(-1).max(-1).values - 1e-6).all()


@pytest.mark.parametrize("coregionalization", ["independent", "lmc"])
def test_multi_utility_posterior_shape(coregionalization):
    data = _choice_data()
    model = VariationalPreferenceGP(
        data,
        PseudoRationalChoiceLikelihood(),
        num_utilities=2,
        inducing_points=6,
        coregionalization=coregionalization,
        num_latents=3 if coregionalization == "lmc" else None,
    )
    assert model.num_outputs == 2 and model.mixing_matrix().shape[-1] == 2
    post = model.posterior(torch.rand(4, 3, 2, dtype=torch.float64))
    assert post.mean.shape == (4, 3, 2)
    assert model.posterior(torch.rand(3, 2, dtype=torch.float64)).mean.shape == (3, 2)


def test_label_model_has_one_utility_per_label():
    g = torch.Generator().manual_seed(0)
    orderings = [torch.randperm(4, generator=g)[:3].tolist() for _ in range(10)]
    data = Rankings(torch.rand(10, 2, dtype=torch.float64), orderings, num_labels=4)
    model = VariationalPreferenceGP(data, PlackettLuceLikelihood(), inducing_points=5)
    assert model.num_outputs == 4
    assert model.expected_log_likelihood(data).shape == (10,)
    # per-label intercepts (overall popularity of a label) through mean_module
    popular = VariationalPreferenceGP(
        data,
        PlackettLuceLikelihood(),
        inducing_points=5,
        mean_module=ConstantMean(batch_shape=torch.Size([4])),
    )
    fit_variational(popular, epochs=2, seed=0)
    assert popular.posterior(data.features[:3]).mean.shape == (3, 4)


def test_cvr_selects_inducing_points_among_the_designs():
    X, comp, _ = make_pairwise_data(30, 60)
    data = PairwiseComparisons(X, comp)
    model = VariationalPreferenceGP(data, inducing_points=8)  # CVR by default
    Z = model.base_variational_strategy.inducing_points
    assert Z.shape == (8, 2)
    assert ((Z.unsqueeze(-2) - X).abs().amax(-1) == 0).any(-1).all()
    expected = ConditionalVarianceReduction().allocate_inducing_points(
        X, model.covar_module, 8
    )
    assert torch.equal(Z, expected)
    for allocator in (RandomSubset(seed=0), KMeans(seed=0)):
        other = VariationalPreferenceGP(
            data, inducing_points=8, inducing_point_allocator=allocator
        )
        assert other.base_variational_strategy.inducing_points.shape == (8, 2)
    fixed = VariationalPreferenceGP(
        data, inducing_points=X[:5], learn_inducing_points=False
    )
    assert torch.equal(fixed.base_variational_strategy.inducing_points, X[:5])
    assert "variational_strategy.inducing_points" not in dict(fixed.named_parameters())


def test_botorch_and_prefbo_pairwise_likelihoods_are_accepted():
    X, comp, _ = make_pairwise_data(10, 20)
    data = PairwiseComparisons(X, comp)
    model = VariationalPreferenceGP(data, BoTorchLogit(), inducing_points=4)
    assert isinstance(model.likelihood, PairwiseLogitLikelihood)
    assert isinstance(
        VariationalPreferenceGP(data, inducing_points=4).likelihood,
        PairwiseProbitLikelihood,
    )


def test_prior_only_model_takes_data_later():
    X, comp, _ = make_pairwise_data(10, 20)
    model = VariationalPreferenceGP(inducing_points=X[:4].clone())
    assert torch.equal(model.datapoints, X[:4])
    fit_variational(model, PairwiseComparisons(X, comp), epochs=2, batch_size=10)
    assert model.data is not None and model.datapoints is X


def test_typed_errors():
    X, comp, _ = make_pairwise_data(10, 20)
    data = PairwiseComparisons(X, comp)
    with pytest.raises(InputTypeError, match="likelihood must be None .* got str"):
        VariationalPreferenceGP(data, "probit")
    with pytest.raises(
        InputTypeError, match="data must be a PairwiseComparisons.*got Tensor"
    ):
        VariationalPreferenceGP(X)
    with pytest.raises(
        UnsupportedError,
        match="PairwiseProbitLikelihood scores one utility per design; got "
        "num_utilities=2",
    ):
        VariationalPreferenceGP(data, num_utilities=2)
    with pytest.raises(
        InputDataError, match=r"num_utilities must be an integer >= 1; got 0"
    ):
        VariationalPreferenceGP(data, num_utilities=0)
    with pytest.raises(
        InputDataError,
        match=r"inducing_points \(a number\) must be at most the number of designs "
        r"n=10; got 11",
    ):
        VariationalPreferenceGP(data, inducing_points=11)
    with pytest.raises(InputDataError, match="coregionalization must be one of"):
        VariationalPreferenceGP(data, coregionalization="icm")
    with pytest.raises(InputDataError, match="num_latents is only used with"):
        VariationalPreferenceGP(data, num_latents=2)
    with pytest.raises(InputDataError, match="not both; got a tensor and an allocator"):
        VariationalPreferenceGP(
            data, inducing_points=X[:3], inducing_point_allocator=RandomSubset()
        )
    with pytest.raises(InputDataError, match=r"without data, inducing_points must be"):
        VariationalPreferenceGP(inducing_points=5)
    with pytest.raises(
        InputDataError, match=r"inducing_points must be M x 2 of dtype torch.float64"
    ):
        VariationalPreferenceGP(
            data, inducing_points=torch.rand(3, 3, dtype=torch.float64)
        )
    with pytest.raises(InputDataError, match=r"covar_module must have batch shape"):
        VariationalPreferenceGP(
            data, covar_module=RBFKernel(batch_shape=torch.Size([3]))
        )
    with pytest.raises(
        InputTypeError,
        match="PseudoRationalChoiceLikelihood reads ChoiceSets data; got "
        "PairwiseComparisons",
    ):
        VariationalPreferenceGP(data, PseudoRationalChoiceLikelihood(), num_utilities=2)
    with pytest.raises(UnsupportedError, match="needs unbatched n x d designs"):
        VariationalPreferenceGP(PairwiseComparisons(X.expand(2, 10, 2), comp))
    jnd = PairwiseComparisons(X, comp, comp[:3])
    with pytest.raises(UnsupportedError, match="reads comparisons only; got data"):
        VariationalPreferenceGP(jnd)
    VariationalPreferenceGP(jnd, JustNoticeableDifferenceLikelihood())  # fine
    model = VariationalPreferenceGP(data, inducing_points=3)
    with pytest.raises(InputDataError, match=r"X must be a batch_shape x q x 2 tensor"):
        model.posterior(torch.rand(4, 3, dtype=torch.float64))
    with pytest.raises(UnsupportedError, match="does not support output_indices"):
        model.posterior(X, output_indices=[0])
    with pytest.raises(InputTypeError, match="observation_noise must be a bool or"):
        model.posterior(X, observation_noise="yes")
    with pytest.raises(InputDataError, match="the model has no data"):
        VariationalPreferenceGP(inducing_points=X[:3]).elbo()


@pytest.mark.parametrize("num_utilities", [1, 2])
def test_observation_noise_adds_the_utility_noise_to_the_diagonal(num_utilities):
    if num_utilities == 1:
        X, comp, _ = make_pairwise_data(10, 20, seed=4)
        model = VariationalPreferenceGP(
            PairwiseComparisons(X, comp), PairwiseProbitLikelihood(noise_std=0.7)
        )
    else:
        model = VariationalPreferenceGP(
            _choice_data(),
            PseudoRationalChoiceLikelihood(noise_std=0.7),
            num_utilities=2,
            inducing_points=6,
        )
    _perturb(model)
    Xt = torch.rand(3, 4, 2, dtype=torch.float64)
    with torch.no_grad():
        plain = model.posterior(Xt)
        noisy = model.posterior(Xt, observation_noise=True)
        given = model.posterior(
            Xt, observation_noise=torch.full((3, 4, num_utilities), 0.3)
        )
    cov0 = plain.distribution.covariance_matrix
    eye = torch.eye(cov0.shape[-1], dtype=cov0.dtype)
    torch.testing.assert_close(noisy.mean, plain.mean)
    torch.testing.assert_close(noisy.distribution.covariance_matrix, cov0 + 0.49 * eye)
    torch.testing.assert_close(given.distribution.covariance_matrix, cov0 + 0.3 * eye)


def test_label_models_learn_a_constant_per_label_by_default():
    r"""Label comparisons identify each label's baseline preference: with a
    context-free winner (label 2 always first) the learned constants order it."""
    g = torch.Generator().manual_seed(0)
    orderings = [[2] + torch.randperm(2, generator=g).tolist() for _ in range(40)]
    X = torch.rand(40, 1, generator=g, dtype=torch.float64)
    data = Rankings(X, orderings, num_labels=3)
    model = VariationalPreferenceGP(data, PlackettLuceLikelihood(), inducing_points=5)
    assert isinstance(model.mean_module, ConstantMean)
    fit_variational(model, batch_size=40, epochs=150, lr=0.05, seed=0)
    const = model.mean_module.constant.detach().reshape(-1)
    assert const[2] > const[0] + 0.5 and const[2] > const[1] + 0.5
    # object comparisons keep the zero mean (a constant is not identified)
    Xp, comp, _ = make_pairwise_data(8, 10)
    assert not isinstance(
        VariationalPreferenceGP(PairwiseComparisons(Xp, comp)).mean_module, ConstantMean
    )


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


def test_non_finite_inducing_points_and_q_u_are_rejected():
    X, comp, _ = make_pairwise_data(10, 20)
    data = PairwiseComparisons(X, comp)
    Z = torch.rand(4, 2, dtype=torch.float64)
    for bad in (math.nan, math.inf):
        Zb = Z.clone()
        Zb[2, 1] = bad
        with pytest.raises(
            InputDataError,
            match=r"inducing_points must be finite; got 1 NaN or infinite entries "
            r"\(first at \(2, 1\)\)",
        ):
            VariationalPreferenceGP(data, inducing_points=Zb)
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
    # difference's sd is many times s (20-node Gauss-Hermite was 0.12 nats off)
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
