import math

import pytest
import torch
from botorch.models.pairwise_gp import PairwiseGP
from botorch.models.transforms.input import Normalize
from gpytorch.kernels import MaternKernel, ScaleKernel
from gpytorch.means import LinearMean

from prefbo import PairwiseLaplaceGP
from prefbo.acquisition import (
    GetPairMoments,
    KernelPairMoments,
    PairMoments,
)
from prefbo.acquisition.pair_moments import (
    SIGMA_JITTER,
    eubo_from_moments,
    pair_moments,
)
from prefbo.kernels import default_preference_covar_module
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.utils.testing import make_pairwise_data

FAST = ["laplace", "ep", "skew", "variational"]


# --------------------------------------------------------------- dispatch
@pytest.mark.parametrize("name", FAST)
def test_prefbo_models_get_the_moments_read_once(make_model, name):
    moments = pair_moments(make_model(name, d=3))
    assert type(moments) is KernelPairMoments
    assert moments.rbf is not None  # the default kernel: written out
    assert moments.numpy_ready  # float64 on the CPU


def test_other_kernels_read_once_through_covar_module(make_model):
    model = make_model("laplace", covar_module=ScaleKernel(MaternKernel(nu=2.5)))
    moments = pair_moments(model)
    assert type(moments) is KernelPairMoments
    assert moments.rbf is None and not moments.numpy_ready


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m("ep", input_transform=Normalize(d=2)),
        lambda m: m("skew", input_transform=Normalize(d=2)),
        lambda m: PairwiseGP(*make_pairwise_data(15, 30, seed=2)[:2]).eval(),
        lambda m: PairwiseLaplaceGP(
            *make_pairwise_data(8, 10, batch_shape=torch.Size([3]))[:2]
        ).eval(),
        lambda m: PairwiseLaplaceGP(
            None, None, covar_module=default_preference_covar_module(2)
        ).eval(),
        lambda m: m("variational", mean_module=LinearMean(2)),
    ],
    ids=[
        "input-transform",
        "skew-input-transform",
        "botorch",
        "batched",
        "prior",
        "linear-mean",
    ],
)
def test_other_models_go_through_the_posterior(make_model, make):
    model = make(make_model)
    assert type(pair_moments(model)) is PairMoments


def test_a_model_class_of_ones_own_registers_its_extractor(make_model):
    class MyGP(PairwiseLaplaceGP):
        pass

    X, comp, _ = make_pairwise_data(10, 12, seed=3)
    model = MyGP(X, comp).eval()
    assert type(pair_moments(model)) is KernelPairMoments  # the parent's

    @GetPairMoments.register(MyGP)
    def _mine(model):
        return PairMoments(model)

    try:
        assert type(pair_moments(model)) is PairMoments
    finally:
        del GetPairMoments.funcs[(MyGP,)]
        GetPairMoments.reorder()
        GetPairMoments._cache.clear()
    assert type(pair_moments(model)) is KernelPairMoments


# --------------------------------------------------------------- values
def test_eubo_from_moments_closed_form():
    # equal means: E[max(f1, f2)] = μ2 + σ φ(0); zero variance clamps at 1e-8
    delta = torch.tensor([0.0, 0.0, 0.3], dtype=torch.float64)
    mean2 = torch.tensor([1.5, -2.0, 0.0], dtype=torch.float64)
    var = torch.tensor([4.0, 0.0, 0.0], dtype=torch.float64)
    got = eubo_from_moments(delta, mean2, var)
    phi0 = 1.0 / math.sqrt(2.0 * math.pi)
    expected = [1.5 + 2.0 * phi0, -2.0 + math.sqrt(SIGMA_JITTER) * phi0, 0.3]
    torch.testing.assert_close(got, torch.tensor(expected).double())
    torch.testing.assert_close(eubo_from_moments(delta, None, var), got - mean2)


@pytest.mark.parametrize("name", FAST + ["matern"])
def test_pairs_equal_the_posterior(make_model, name):
    if name == "matern":
        model = make_model("laplace", covar_module=ScaleKernel(MaternKernel()))
    else:
        model = make_model(name, d=3)
    d = model.datapoints.shape[-1]
    X = torch.rand(4, 5, 2, d, dtype=torch.float64)
    X[0, 0, 1] = X[0, 0, 0]  # a pair with zero variance
    with torch.no_grad():
        got = pair_moments(model).pairs(X)
        expected = PairMoments(model).pairs(X)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == (4, 5)
        torch.testing.assert_close(g, e, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", ["laplace", "skew", "variational"])
def test_written_out_gradient_equals_autograd(make_model, name):
    moments = pair_moments(make_model(name, d=3))
    assert type(moments) is not PairMoments  # the fast path applies
    X = torch.rand(7, 2, 3, dtype=torch.float64)
    X[0, 1] = X[0, 0]
    for add in (True, False):
        v, g = moments.eubo_and_grad(X, add)
        v_ref, g_ref = PairMoments.eubo_and_grad(moments, X, add)
        torch.testing.assert_close(v, v_ref, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", FAST)
def test_numpy_equals_torch(make_model, name):
    moments = pair_moments(make_model(name, d=3))
    X = torch.rand(2, 6, 2, 3, dtype=torch.float64)
    for add in (True, False):
        values, grad = moments.numpy_eubo_and_grad(X.numpy(), add)
        v_ref, g_ref = moments.eubo_and_grad(X, add)
        assert values.shape == (2, 6) and grad.shape == (2, 6, 2, 3)
        torch.testing.assert_close(torch.from_numpy(values), v_ref, rtol=1e-10, atol=0)
        torch.testing.assert_close(torch.from_numpy(grad), g_ref, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("name", ["laplace", "skew", "variational"])
def test_joint_moments_equal_the_posterior(make_model, name):
    model = make_model(name, d=3)
    X = torch.rand(9, 3, dtype=torch.float64)
    mean, cov = pair_moments(model).joint(X)
    with torch.no_grad():
        post = model.posterior(X)
        torch.testing.assert_close(mean, post.mean.reshape(-1))
        torch.testing.assert_close(cov, post.covariance_matrix)


@pytest.mark.parametrize("noise_std", [1e-8, 1e-10])
def test_pair_moments_of_a_stiff_laplace_model_match_its_posterior(noise_std):
    # contradicting answers at a tiny noise: the curvature is ~1/noise², the
    # model predicts from P = I - A⁻¹ and so must the pair moments
    torch.manual_seed(0)
    X = torch.rand(3, 2, dtype=torch.float64)
    model = PairwiseLaplaceGP(
        X,
        torch.tensor([[0, 1], [1, 0]]),
        likelihood=PairwiseProbitLikelihood(noise_std=noise_std),
    )
    Xq = torch.stack([X[0:1], X[2:3]], -2)  # 1 x 2 x d
    mean_diff, _, var = pair_moments(model).pairs(Xq)
    post = model.posterior(Xq)
    c = post.covariance_matrix.detach()[0]
    m = post.mean.detach()[0, :, 0]
    torch.testing.assert_close(var.squeeze(), c[0, 0] + c[1, 1] - 2 * c[0, 1])
    torch.testing.assert_close(mean_diff.squeeze(), m[0] - m[1], rtol=0, atol=1e-8)
