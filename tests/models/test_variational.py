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

from prefbo.data import PairwiseComparisons, Rankings
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.fit import fit_variational
from prefbo.inducing import ConditionalVarianceReduction, KMeans, RandomSubset
from prefbo.likelihoods import (
    JustNoticeableDifferenceLikelihood,
    PairwiseLogitLikelihood,
    PairwiseProbitLikelihood,
    PlackettLuceLikelihood,
    PseudoRationalChoiceLikelihood,
)
from prefbo.models.variational import VariationalPreferenceGP
from prefbo.utils.testing import make_pairwise_data


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
def test_multi_utility_posterior_shape(coregionalization, choice_data):
    data = choice_data()
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
        InputDataError, match=r"num_utilities must be an int >= 1; got num_utilities=0"
    ):
        VariationalPreferenceGP(data, num_utilities=0)
    with pytest.raises(
        InputTypeError, match=r"num_utilities must be an int >= 1; got float 2\.0"
    ):
        VariationalPreferenceGP(data, num_utilities=2.0)
    with pytest.raises(
        InputTypeError, match=r"inducing_points must be an int >= 1; got bool True"
    ):
        VariationalPreferenceGP(data, inducing_points=True)
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
def test_observation_noise_adds_the_utility_noise_to_the_diagonal(
    num_utilities, choice_data, perturb_q_u
):
    if num_utilities == 1:
        X, comp, _ = make_pairwise_data(10, 20, seed=4)
        model = VariationalPreferenceGP(
            PairwiseComparisons(X, comp), PairwiseProbitLikelihood(noise_std=0.7)
        )
    else:
        model = VariationalPreferenceGP(
            choice_data(),
            PseudoRationalChoiceLikelihood(noise_std=0.7),
            num_utilities=2,
            inducing_points=6,
        )
    perturb_q_u(model)
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


def test_non_finite_inducing_points_are_rejected():
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


def test_designs_off_the_unit_cube_warn_with_the_default_kernel_only():
    # BoTorch's default priors assume [0, 1]^d, as for the pairwise GPs
    from botorch.exceptions import InputDataWarning

    X, comp, _ = make_pairwise_data(12, 20, d=2, seed=0)
    with pytest.warns(InputDataWarning, match=r"scale the designs to \[0, 1\]\^2"):
        VariationalPreferenceGP(PairwiseComparisons(5 * X - 2, comp))
    VariationalPreferenceGP(
        PairwiseComparisons(5 * X - 2, comp), covar_module=RBFKernel(ard_num_dims=2)
    )
    VariationalPreferenceGP(PairwiseComparisons(X, comp))
