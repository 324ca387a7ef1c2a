import gpytorch.kernels as gk
import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP

from prefbo.exceptions import InputDataError
from prefbo.mlls import PairwiseLaplaceMLL
from prefbo.models import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.models.training_data import (
    check_mask,
    check_same_layout,
    padded_train_covariance,
)
from prefbo.utils.testing import make_pairwise_data


def test_masks_that_contradict_each_other_are_named():
    X = torch.rand(2, 4, 2, dtype=torch.float64)
    C = torch.tensor([[[0, 1], [1, 2]], [[0, 3], [1, 0]]])
    design_mask = torch.tensor([[True] * 4, [True, True, False, False]])
    with pytest.raises(InputDataError, match=r"refer to designs that design_mask"):
        PairwiseLaplaceGP(
            X, C, design_mask=design_mask, comparison_mask=torch.ones(2, 2).bool()
        )
    empty = torch.tensor([[True] * 4, [False] * 4])
    with pytest.raises(InputDataError, match=r"batch element\(s\) \[\[1\]\]"):
        PairwiseLaplaceGP(
            X,
            C,
            design_mask=empty,
            comparison_mask=torch.tensor([[1, 1], [0, 0]]).bool(),
        )


def test_mask_checks_name_the_mask():
    data = torch.zeros(3, 2)
    with pytest.raises(InputDataError, match="design_mask must be a bool tensor"):
        check_mask(data, torch.ones(3), "design_mask", torch.Size([3]))
    with pytest.raises(InputDataError, match=r"must have shape \(3,\)"):
        check_mask(data, torch.ones(4).bool(), "design_mask", torch.Size([3]))
    with pytest.raises(InputDataError, match="cannot change the shape of datapoints"):
        check_same_layout(data, torch.zeros(1, 2), torch.zeros(4, 2), torch.zeros(1, 2))


def test_padded_train_covariance():
    K = torch.tensor([[2.0, 0.5, 0.3], [0.5, 4.0, 0.1], [0.3, 0.1, 9.0]])
    K = K.double()
    mask = torch.tensor([True, True, False])
    out = padded_train_covariance(K, mask, 0.1)
    expected = torch.tensor([[2.0, 0.5, 0.0], [0.5, 4.0, 0.0], [0.0, 0.0, 1.0]])
    expected = expected.double() + 0.1 * 3.0 * torch.eye(3, dtype=torch.float64)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(
        padded_train_covariance(K, None, 0.0), K
    )  # no nugget: K itself


def test_duplicate_designs_are_merged_and_comparisons_all_count():
    X = torch.tensor(
        [[0.1, 0.2], [0.5, 0.5], [0.1, 0.2], [0.9, 0.1]], dtype=torch.float64
    )
    comp = torch.tensor([[0, 1], [1, 2], [3, 2], [3, 2]])
    model = PairwiseLaplaceGP(X, comp)
    assert model.n == 3 and model.m == 4
    merged = PairwiseLaplaceGP(
        X[[0, 1, 3]], torch.tensor([[0, 1], [1, 0], [2, 0], [2, 0]])
    )
    torch.testing.assert_close(model.utility, merged.utility)


def test_learned_input_transform_bounds_match_botorch_before_any_fit():
    # Normalize without bounds learns them from the training designs when the
    # data are set, as BoTorch's PairwiseGP does (prefbo kept the identity
    # until a training-mode forward, so an unfitted model predicted on the
    # raw scale), and again when set_train_data brings new designs
    from botorch.models.transforms.input import Normalize

    X, comp = make_pairwise_data(20, 30, seed=6)[:2]
    X = X * 10 + 5
    bt = PairwiseGP(X, comp, input_transform=Normalize(d=2))
    pb = PairwiseLaplaceGP(X, comp, input_transform=Normalize(d=2))
    torch.testing.assert_close(pb.input_transform.bounds, bt.input_transform.bounds)
    Xt = torch.rand(3, 2, dtype=torch.float64) * 10 + 5
    post_b, post_p = bt.posterior(Xt), pb.posterior(Xt)
    torch.testing.assert_close(post_p.mean, post_b.mean, rtol=0, atol=1e-6)
    torch.testing.assert_close(
        post_p.covariance_matrix, post_b.covariance_matrix, rtol=0, atol=1e-6
    )
    pb.set_train_data(X * 2, comp)
    lo, hi = (X * 2).min(0).values, (X * 2).max(0).values
    torch.testing.assert_close(pb.input_transform.bounds, torch.stack([lo, hi]))


# ------------------------------------------------- every kernel GPyTorch ships
# Continuous-input kernels with one output: the stationary and non-stationary
# families, each alone, inside a ScaleKernel, and in sums and products. A
# kernel whose output autograd saves (RQ's power, Periodic's exp, the spectral
# mixture's product) must not have the nugget written into it in place.
def _stationary(d):
    return {
        "RBF": lambda: gk.RBFKernel(ard_num_dims=d),
        "Matern05": lambda: gk.MaternKernel(nu=0.5, ard_num_dims=d),
        "Matern15": lambda: gk.MaternKernel(nu=1.5, ard_num_dims=d),
        "Matern25": lambda: gk.MaternKernel(nu=2.5, ard_num_dims=d),
        "RQ": lambda: gk.RQKernel(ard_num_dims=d),
        "Periodic": lambda: gk.PeriodicKernel(ard_num_dims=d),
        "SpectralMixture": lambda: gk.SpectralMixtureKernel(
            num_mixtures=2, ard_num_dims=d
        ),
        "PiecewisePolynomial0": lambda: gk.PiecewisePolynomialKernel(q=0),
        "PiecewisePolynomial3": lambda: gk.PiecewisePolynomialKernel(q=3),
        "RFF": lambda: gk.RFFKernel(num_samples=16, num_dims=d),
        "AdditiveStructure": lambda: gk.AdditiveStructureKernel(
            gk.RBFKernel(), num_dims=d
        ),
        "ProductStructure": lambda: gk.ProductStructureKernel(
            gk.RBFKernel(), num_dims=d
        ),
        "NewtonGirardAdditive": lambda: gk.NewtonGirardAdditiveKernel(
            gk.RBFKernel(ard_num_dims=d), num_dims=d, max_degree=2
        ),
    }


def _non_stationary(d):
    return {
        "Linear": lambda: gk.LinearKernel(),
        "Polynomial2": lambda: gk.PolynomialKernel(power=2),
        "Arc": lambda: gk.ArcKernel(gk.MaternKernel(nu=2.5), num_parameters=d),
        "Constant+RBF": lambda: gk.ConstantKernel() + gk.RBFKernel(),
    }


def _kernel_cases():
    d = 2
    cases = {**_stationary(d), **_non_stationary(d)}
    # cos(π |x - x'| / p) is positive definite in one dimension only
    cases["Cosine"] = lambda: gk.CosineKernel()
    out = []
    for name, make in cases.items():
        dim = 1 if name == "Cosine" else d
        out.append(pytest.param(make, dim, id=name))
        out.append(
            pytest.param(
                lambda make=make: gk.ScaleKernel(make()), dim, id=f"Scale{name}"
            )
        )
    out += [
        pytest.param(
            lambda: gk.RBFKernel() + gk.PeriodicKernel(), d, id="RBF+Periodic"
        ),
        pytest.param(
            lambda: gk.ScaleKernel(gk.RQKernel()) + gk.ScaleKernel(gk.LinearKernel()),
            d,
            id="ScaleRQ+ScaleLinear",
        ),
        pytest.param(
            lambda: gk.RBFKernel(active_dims=[0]) * gk.PeriodicKernel(active_dims=[1]),
            d,
            id="RBF*Periodic",
        ),
        pytest.param(
            lambda: gk.ScaleKernel(
                gk.SpectralMixtureKernel(num_mixtures=2, ard_num_dims=d)
                * gk.MaternKernel(nu=1.5)
            ),
            d,
            id="Scale(SpectralMixture*Matern15)",
        ),
    ]
    return out


@pytest.mark.filterwarnings("ignore::prefbo.exceptions.NumericalWarning")
@pytest.mark.filterwarnings("ignore::prefbo.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings("ignore::botorch.exceptions.OptimizationWarning")
@pytest.mark.parametrize("model_cls", [PairwiseLaplaceGP, PairwiseEPGP])
@pytest.mark.parametrize(("make_kernel", "d"), _kernel_cases())
def test_every_gpytorch_kernel_fits_and_predicts(model_cls, make_kernel, d):
    torch.manual_seed(0)
    X, C, _ = make_pairwise_data(6, 8, d=d, seed=1)
    model = model_cls(X, C, covar_module=make_kernel().to(X))
    # a few L-BFGS-B steps: each evaluation runs the evidence's backward
    fit_gpytorch_mll(
        PairwiseLaplaceMLL(model.likelihood, model),
        optimizer_kwargs={"options": {"maxiter": 3}},
        max_attempts=1,
    )
    test_X = torch.rand(4, d, dtype=torch.float64)
    post = model.posterior(test_X)
    assert torch.isfinite(post.mean).all()
    assert torch.isfinite(post.variance).all() and (post.variance >= 0).all()
    # the fitted evidence has a gradient at the fitted hyperparameters
    model.train()
    mll = PairwiseLaplaceMLL(model.likelihood, model)
    loss = -mll(model(*model.train_inputs), model.train_targets)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)
