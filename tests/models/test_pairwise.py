import warnings

import pytest
import torch
from botorch import settings as botorch_settings
from botorch.exceptions import InputDataWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP
from botorch.models.transforms.input import Normalize
from gpytorch.kernels import RBFKernel

from prefbo import PairwiseEPGP, PairwiseLaplaceGP, PairwiseLaplaceMLL
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.utils.testing import make_pairwise_data, set_scale_kernel, tolerance


def test_posterior_refreshes_when_hyperparameters_change():
    X, comp = make_pairwise_data(20, 30)[:2]
    model = PairwiseLaplaceGP(X, comp)
    Xt = torch.rand(5, 2, dtype=torch.float64)
    before = model.posterior(Xt).mean
    set_scale_kernel(model, 4.0, torch.tensor([[0.2, 0.2]], dtype=torch.float64))
    fresh = PairwiseLaplaceGP(X, comp)
    set_scale_kernel(fresh, 4.0, torch.tensor([[0.2, 0.2]], dtype=torch.float64))
    torch.testing.assert_close(model.posterior(Xt).mean, fresh.posterior(Xt).mean)
    assert not torch.allclose(before, fresh.posterior(Xt).mean)


@pytest.mark.parametrize("x_batch", [(), (5,), (2, 3)], ids=["q", "b-q", "b1-b2-q"])
def test_joint_posterior_shapes_and_blocks(tkwargs, x_batch):
    X, comp = make_pairwise_data(20, 30, **tkwargs)[:2]
    model = PairwiseLaplaceGP(X, comp)
    Xt = torch.rand(x_batch + (3, 2), **tkwargs)
    post = model.posterior(Xt)
    assert post.mean.shape == x_batch + (3, 1)
    assert post.covariance_matrix.shape == x_batch + (3, 3)
    # each q-batch block equals the posterior of those points alone
    flat = Xt.reshape(-1, 3, 2)
    for k in range(flat.shape[0]):
        single = model.posterior(flat[k])
        torch.testing.assert_close(
            post.covariance_matrix.reshape(-1, 3, 3)[k],
            single.covariance_matrix,
            rtol=tolerance(tkwargs["dtype"], 1e-9, 1e-3),
            atol=1e-5,
        )


def test_batched_model_equals_separate_models(tkwargs):
    X, comp = make_pairwise_data(12, 25, batch_shape=torch.Size([3]), **tkwargs)[:2]
    batched = PairwiseLaplaceGP(X, comp)
    Xt = torch.rand(4, 3, 2, 2, **tkwargs)  # 4 x (model batch 3) x q=2
    post = batched.posterior(Xt)
    assert post.mean.shape == (4, 3, 2, 1)
    for b in range(3):
        single = PairwiseLaplaceGP(X[b], comp[b])
        ps = single.posterior(Xt[:, b])
        tol = tolerance(tkwargs["dtype"], 1e-8, 1e-3)
        torch.testing.assert_close(post.mean[:, b], ps.mean, rtol=tol, atol=tol)
        torch.testing.assert_close(
            post.covariance_matrix[:, b], ps.covariance_matrix, rtol=tol, atol=tol
        )


def test_state_dict_round_trip():
    X, comp = make_pairwise_data(20, 30, seed=5)[:2]
    model = PairwiseLaplaceGP(X, comp)
    fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model))
    other = PairwiseLaplaceGP(X, comp)
    other.load_state_dict(model.state_dict())
    Xt = torch.rand(4, 2, dtype=torch.float64)
    torch.testing.assert_close(other.posterior(Xt).mean, model.posterior(Xt).mean)
    assert "datapoints" not in model.state_dict()


def test_prior_only_model():

    model = PairwiseLaplaceGP(None, None, covar_module=RBFKernel())
    post = model.posterior(torch.rand(3, 1))
    assert post.mean.abs().max() == 0
    with pytest.raises(InputDataError, match="explicit covar_module"):
        PairwiseLaplaceGP(None, None)


def test_bad_posterior_and_conditioning_input():
    X, comp = make_pairwise_data(20, 30)[:2]
    model = PairwiseLaplaceGP(X, comp)
    with pytest.raises(InputDataError, match="d=2 features in its last dimension"):
        model.posterior(torch.rand(3, 5, dtype=torch.float64))
    with pytest.raises(UnsupportedError, match="output_indices"):
        model.posterior(torch.rand(3, 2, dtype=torch.float64), output_indices=[1])
    with pytest.raises(
        InputTypeError, match="model's dtype torch.float64; got torch.float32"
    ):
        model.posterior(torch.rand(3, 2, dtype=torch.float32))
    with pytest.raises(InputDataError, match="Y must be a batch_shape x m x 2"):
        model.condition_on_observations(
            torch.rand(2, 2, dtype=torch.float64), torch.rand(2, 1)
        )
    with pytest.raises(InputDataError, match="X1 and X2 must have the same shape"):
        model.predict_preference(torch.rand(2, 2).double(), torch.rand(3, 2).double())
    with pytest.raises(InputDataError, match=r"X must have d=2 features like the"):
        model.condition_on_observations(
            torch.rand(2, 3, dtype=torch.float64), torch.tensor([[0, 1]])
        )
    Xq = torch.rand(3, 2, dtype=torch.float64)
    with pytest.raises(InputDataError, match=r"observation_noise must broadcast"):
        model.posterior(Xq, observation_noise=torch.ones(5, dtype=torch.float64))
    with pytest.raises(InputDataError, match=r"finite variances >= 0"):
        model.posterior(Xq, observation_noise=-torch.ones(3, dtype=torch.float64))
    noisy = model.posterior(Xq, observation_noise=torch.full((3, 1), 0.5).double())
    plain = model.posterior(Xq)
    torch.testing.assert_close(noisy.variance, plain.variance + 0.5)
    model.train()
    with pytest.raises(InputDataError, match="training designs"):
        model(torch.rand(4, 2, dtype=torch.float64))


def test_input_transform_matches_botorch():
    from botorch.models.transforms.input import Normalize

    X, comp = make_pairwise_data(20, 30, seed=6)[:2]
    X = X * 10 + 3
    bounds = torch.tensor([[3.0, 3.0], [13.0, 13.0]], dtype=torch.float64)
    bt = PairwiseGP(X, comp, input_transform=Normalize(d=2, bounds=bounds))
    pb = PairwiseLaplaceGP(X, comp, input_transform=Normalize(d=2, bounds=bounds))
    Xt = torch.rand(3, 2, dtype=torch.float64) * 10 + 3
    torch.testing.assert_close(
        pb.posterior(Xt).mean, bt.posterior(Xt).mean, rtol=0, atol=1e-6
    )
    fit_gpytorch_mll(PairwiseLaplaceMLL(pb.likelihood, pb))
    assert torch.isfinite(pb.posterior(Xt).mean).all()


@pytest.mark.parametrize("model_cls", [PairwiseLaplaceGP, PairwiseEPGP])
def test_default_priors_warn_about_inputs_outside_the_unit_cube(model_cls):
    # BoTorch's default lengthscale prior assumes the unit cube, as its other
    # models say with an InputDataWarning
    X, C, _ = make_pairwise_data(6, 8, d=3)
    with pytest.warns(InputDataWarning, match=r"Normalize\(d=3, bounds"):
        model_cls(4.0 * X - 2.0, C)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputDataWarning)
        model_cls(X, C)  # inside: no warning
        model_cls(4.0 * X, C, input_transform=Normalize(d=3))  # scaled by it
        model_cls(4.0 * X, C, covar_module=RBFKernel())  # the user's own kernel
        model_cls(None, None, covar_module=RBFKernel())  # no data
        with botorch_settings.validate_input_scaling(False):
            model_cls(4.0 * X, C)
        # padding designs are not data
        padded = X.clone()
        padded[-1] = 99.0
        mask = torch.tensor([True] * 5 + [False])
        model_cls(
            padded.unsqueeze(0),
            C[(C < 5).all(-1)].unsqueeze(0),
            design_mask=mask.unsqueeze(0),
        )


def test_a_non_finite_evaluation_does_not_become_the_next_warm_start():
    # a fit backs off from a failed evaluation (prefbo.mlls.backing_off): the
    # next one must not start from that evaluation's approximation
    X, C, _ = make_pairwise_data(6, 8)
    model = PairwiseEPGP(X, C)
    model.train()
    model(*model.train_inputs)
    good = model._warm
    compute = model._compute_evidence

    def failed(K):
        evidence, state = compute(K)
        return evidence * float("nan"), state

    model._compute_evidence = failed
    model(*model.train_inputs)
    assert model._warm is good


@pytest.mark.parametrize("model_cls", [PairwiseLaplaceGP, PairwiseEPGP])
@pytest.mark.parametrize(
    "dtype, noise_std", [(torch.float64, 1e-8), (torch.float32, 1e-2)]
)
def test_a_batch_at_tiny_noise_predicts_like_its_elements(model_cls, dtype, noise_std):
    # contradicting answers at a tiny noise make the curvature stiff; a batch
    # of 4 problems of 3 designs (batch size neither n nor m) takes the same
    # projector path as each problem alone
    g = torch.Generator().manual_seed(0)
    X = torch.rand(4, 3, 2, generator=g, dtype=torch.float64).to(dtype)
    comp = torch.tensor([[0, 1], [1, 0], [1, 2]])
    lik = PairwiseProbitLikelihood(noise_std=noise_std)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # EP's sweep budget on degenerate data
        batched = model_cls(X, comp.expand(4, 3, 2), likelihood=lik).eval()
        var = batched.posterior(X).variance
        for b in range(4):
            single = model_cls(X[b], comp, likelihood=lik).eval()
            # float32: the formed system (taken alone, below float32's
            # stiffness limit) is good to ~1e-3 here, the projector to 1e-5
            tol = 1e-6 if dtype == torch.float64 else 1e-3
            torch.testing.assert_close(
                var[b], single.posterior(X[b]).variance, rtol=tol, atol=tol * 1e-2
            )
