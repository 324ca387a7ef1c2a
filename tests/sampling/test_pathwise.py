import ast
import pathlib

import pytest
import torch
from botorch.sampling.pathwise import draw_matheron_paths

import prefbo.sampling
from prefbo.acquisition import thompson_batch
from prefbo.data import ChoiceSets, PairwiseComparisons
from prefbo.exceptions import UnsupportedError
from prefbo.likelihoods import PseudoRationalChoiceLikelihood
from prefbo.models.variational import VariationalPreferenceGP
from prefbo.sampling.pathwise import VariationalPreferencePath, draw_variational_paths
from prefbo.utils.testing import make_pairwise_data


def _random_q(model, seed):
    r"""Move q(u) away from the prior: a random whitened mean and factor."""
    g = torch.Generator().manual_seed(seed)
    q_u = model.base_variational_strategy._variational_distribution
    mean, chol = q_u.variational_mean, q_u.chol_variational_covar
    with torch.no_grad():
        mean.copy_(torch.randn(mean.shape, generator=g, dtype=mean.dtype))
        lower = torch.randn(chol.shape, generator=g, dtype=chol.dtype).tril(-1)
        chol.copy_(0.3 * lower + 0.6 * torch.eye(chol.shape[-1], dtype=chol.dtype))


def _pairwise_model(seed=1):
    X, comp, _ = make_pairwise_data(30, 60, seed=seed)
    model = VariationalPreferenceGP(PairwiseComparisons(X, comp), inducing_points=12)
    _random_q(model, seed)
    return model


def _choice_model(coregionalization):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(15, 2, generator=g, dtype=torch.float64)
    sets = torch.stack([torch.randperm(15, generator=g)[:3] for _ in range(20)])
    chosen = torch.zeros(20, 3, dtype=torch.bool)
    chosen[:, 0] = True
    model = VariationalPreferenceGP(
        ChoiceSets(X, sets, chosen),
        PseudoRationalChoiceLikelihood(),
        num_utilities=2,
        inducing_points=8,
        coregionalization=coregionalization,
        num_latents=3 if coregionalization == "lmc" else None,
    )
    _random_q(model, 2)
    return model


def _assert_paths_match_posterior(model, samples, Xt):
    r"""Monte Carlo mean/covariance of path values vs the SVGP predictive."""
    with torch.no_grad():
        post = model.posterior(Xt)
        flat = samples.reshape(samples.shape[0], -1)  # point-major, as GPyTorch
        mean = post.mean.reshape(-1)
        cov = post.distribution.covariance_matrix
    sd = cov.diagonal().sqrt()
    # Monte Carlo sd of a mean at 4000 draws ~ 0.016 sd; random features ~ 1/√F
    torch.testing.assert_close(flat.mean(0), mean, rtol=0, atol=0.06 * sd.max().item())
    corr_err = (torch.cov(flat.T) - cov) / (sd.unsqueeze(-1) * sd)
    assert corr_err.abs().max() < 0.08, corr_err


def test_paths_of_one_utility_have_the_variational_posterior():
    model = _pairwise_model()
    torch.manual_seed(0)
    paths = draw_variational_paths(model, torch.Size([4000]), num_features=2048)
    Xt = torch.rand(4, 2, dtype=torch.float64)
    with torch.no_grad():
        samples = paths(Xt)
    assert samples.shape == (4000, 4)
    _assert_paths_match_posterior(model, samples, Xt)


@pytest.mark.parametrize("coregionalization", ["independent", "lmc"])
def test_paths_of_several_utilities_have_the_variational_posterior(coregionalization):
    model = _choice_model(coregionalization)
    torch.manual_seed(1)
    paths = draw_variational_paths(model, torch.Size([4000]), num_features=2048)
    Xt = torch.rand(3, 2, dtype=torch.float64)
    with torch.no_grad():
        samples = paths(Xt)
    assert samples.shape == (4000, 3, 2)
    _assert_paths_match_posterior(model, samples, Xt)


def test_the_test_models_posterior_differs_from_the_prior():
    r"""A path sampler that ignored q(u) would match the prior, not this posterior."""
    model = _pairwise_model(seed=3)
    Xt = torch.rand(3, 2, dtype=torch.float64)
    with torch.no_grad():
        prior_var = model.covar_module(Xt).to_dense().diagonal()
        post_var = model.posterior(Xt).variance.squeeze(-1)
    # the test above is only meaningful if the posterior differs from the prior
    assert ((prior_var - post_var).abs() / prior_var).max() > 0.1


def test_botorch_dispatch_and_row_per_path_evaluation():
    model = _pairwise_model()
    paths = draw_matheron_paths(model, sample_shape=torch.Size([5]))
    assert isinstance(paths, VariationalPreferencePath)
    rows = torch.rand(5, 7, 2, dtype=torch.float64)
    with torch.no_grad():
        batched = paths(rows)
        each = torch.stack([paths(rows[b])[b] for b in range(5)])
    assert batched.shape == (5, 7)
    torch.testing.assert_close(batched, each)


def test_paths_are_differentiable_in_x_and_thompson_batch_runs():
    model = _pairwise_model()
    paths = draw_variational_paths(model, torch.Size([3]))
    X = torch.rand(3, 2, 2, dtype=torch.float64, requires_grad=True)
    paths(X).sum().backward()
    assert X.grad is not None and torch.isfinite(X.grad).all()
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    best = thompson_batch(model, bounds, 4, raw_samples=64, num_restarts=2, num_steps=5)
    assert best.shape == (4, 2) and ((best >= 0) & (best <= 1)).all()


def test_draw_variational_paths_rejects_other_models():
    with pytest.raises(UnsupportedError, match="needs a VariationalPreferenceGP; got"):
        draw_variational_paths(torch.nn.Linear(2, 1), torch.Size([2]))


def test_thompson_batch_refuses_several_utilities():
    model = _choice_model("independent")
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    with pytest.raises(
        UnsupportedError, match="one utility; got a model with num_outputs=2"
    ):
        thompson_batch(model, bounds, 2)


def test_the_sampling_package_imports_no_models():
    """Registration lives with the models (prefbo.models.pathwise); prefbo.sampling
    reads models through their methods only, so the packages form no cycle."""
    for path in pathlib.Path(prefbo.sampling.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("prefbo.models"), (path, node.module)
