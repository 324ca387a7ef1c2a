import gpytorch
import numpy as np
import pytest
import torch
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

from prefbo.kernels import default_preference_covar_module
from prefbo.kernels.rbf import (
    is_plain_scaled_rbf,
    scaled_rbf,
    scaled_rbf_hyperparameters,
)
from prefbo.utils.testing import tolerance


class _MyRBF(RBFKernel):
    pass


@pytest.mark.parametrize(
    "make, plain",
    [
        (lambda: ScaleKernel(RBFKernel()), True),
        (lambda: ScaleKernel(RBFKernel(ard_num_dims=3)), True),
        (lambda: default_preference_covar_module(3), True),
        (lambda: ScaleKernel(_MyRBF()), False),  # a subclass may compute otherwise
        (lambda: ScaleKernel(MaternKernel()), False),
        (lambda: RBFKernel(), False),
        (lambda: ScaleKernel(RBFKernel(active_dims=[0, 1])), False),
        (lambda: ScaleKernel(RBFKernel(), active_dims=[0, 1]), False),
        (lambda: "not a kernel", False),
    ],
)
def test_is_plain_scaled_rbf(make, plain):
    assert is_plain_scaled_rbf(make()) is plain


def test_hyperparameters_are_detached_and_flat():
    kernel = default_preference_covar_module(3).double()
    with torch.no_grad():
        kernel.base_kernel.lengthscale = torch.tensor([[0.5, 1.0, 2.0]])
        kernel.outputscale = 3.0
    scale, ls = scaled_rbf_hyperparameters(kernel)
    assert scale.ndim == 0 and not scale.requires_grad
    assert scale.item() == pytest.approx(3.0, rel=1e-12)
    assert ls.shape == (3,) and not ls.requires_grad
    assert ls.tolist() == pytest.approx([0.5, 1.0, 2.0], rel=1e-12)
    # one lengthscale for all inputs stays one
    assert scaled_rbf_hyperparameters(ScaleKernel(RBFKernel()))[1].shape == (1,)


def test_hyperparameters_none_for_batched_or_other_kernels():
    batched = default_preference_covar_module(3, batch_shape=torch.Size([2]))
    assert scaled_rbf_hyperparameters(batched) is None
    assert scaled_rbf_hyperparameters(ScaleKernel(MaternKernel())) is None


def test_values_equal_gpytorch_in_torch_and_numpy(tkwargs):
    kernel = default_preference_covar_module(3).to(**tkwargs)
    with torch.no_grad():
        kernel.base_kernel.lengthscale = torch.tensor([[0.4, 0.9, 1.7]], **tkwargs)
        kernel.outputscale = 2.5
    scale, ls = scaled_rbf_hyperparameters(kernel)
    Z = torch.rand(7, 3, **tkwargs)
    X = torch.rand(4, 5, 3, **tkwargs)
    centre = (Z / ls).mean(-2)
    A, B = X / ls - centre, Z / ls - centre
    B_sq = (B * B).sum(-1)
    got = scaled_rbf(A, B, B_sq, scale)
    with gpytorch.settings.lazily_evaluate_kernels(False):
        expected = kernel(X, Z).to_dense()
    tol = tolerance(tkwargs["dtype"], 1e-12, 1e-5)
    assert got.shape == (4, 5, 7)
    torch.testing.assert_close(got, expected, rtol=tol, atol=tol)
    arrays = [t.detach().cpu().numpy() for t in (A, B, B_sq, scale)]
    got_np = scaled_rbf(*arrays)
    assert isinstance(got_np, np.ndarray)
    torch.testing.assert_close(
        torch.from_numpy(got_np).to(got), got, rtol=tol, atol=tol
    )


def test_negative_squared_distances_are_clamped():
    # |a|² + |b|² - 2 a·b below 0 (rounding, here forced): distance 0, value s
    A = torch.tensor([[0.3, 0.1]], dtype=torch.float64)
    B_sq = (A * A).sum(-1) - 1e-3
    assert float(scaled_rbf(A, A, B_sq, 2.0)[0, 0]) == 2.0
    assert float(scaled_rbf(A.numpy(), A.numpy(), B_sq.numpy(), 2.0)[0, 0]) == 2.0
