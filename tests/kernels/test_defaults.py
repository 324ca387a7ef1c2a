import math

import pytest
import torch
from botorch.models import PairwiseGP

from prefbo import PairwiseLaplaceGP
from prefbo.kernels import default_preference_covar_module
from prefbo.space import Circular, Continuous, Space


def test_default_kernel_matches_botorch_pairwise_gp():
    X = torch.rand(6, 3, dtype=torch.float64)
    comp = torch.tensor([[0, 1], [2, 3]])
    ours = PairwiseLaplaceGP(X, comp).covar_module
    theirs = PairwiseGP(X, comp).covar_module
    torch.testing.assert_close(ours.outputscale, theirs.outputscale)
    torch.testing.assert_close(
        ours.base_kernel.lengthscale, theirs.base_kernel.lengthscale
    )
    torch.testing.assert_close(ours(X).to_dense(), theirs(X).to_dense())
    ls, os_ = torch.tensor(0.7), torch.tensor(3.0)
    assert ours.base_kernel.lengthscale_prior.log_prob(ls) == (
        theirs.base_kernel.lengthscale_prior.log_prob(ls)
    )
    assert ours.outputscale_prior.log_prob(os_) == theirs.outputscale_prior.log_prob(
        os_
    )
    assert ours.raw_outputscale_constraint.lower_bound == (
        theirs.raw_outputscale_constraint.lower_bound
    )
    assert ours.raw_outputscale_constraint.upper_bound == (
        theirs.raw_outputscale_constraint.upper_bound
    )


def test_default_kernel_is_batched_per_element():
    k = default_preference_covar_module(dim=2, batch_shape=torch.Size([4]))
    assert k.outputscale.shape == (4,)
    assert k.base_kernel.lengthscale.shape == (4, 1, 2)


def test_default_kernel_is_periodic_in_a_circular_variable():
    # the circular encoding makes the default RBF periodic: k(359°, 1°) =
    # k(1°, 3°) = s exp(-sin²(Δθ / 2) / ℓ²) in closed form (a chord of
    # sin(Δθ / 2) in each of two columns with the same ℓ)
    space = Space([Circular("hue", 0.0, 360.0), Continuous("x", 0.0, 1.0)])
    kernel = default_preference_covar_module(space.dim)
    X = space.encode(
        [
            {"hue": 359.0, "x": 0.3},
            {"hue": 1.0, "x": 0.3},
            {"hue": 3.0, "x": 0.3},
            {"hue": 0.0, "x": 0.3},
            {"hue": 360.0, "x": 0.3},
        ]
    )
    with torch.no_grad():
        K = kernel(X).to_dense()
        ls = float(kernel.base_kernel.lengthscale[0, 0])
        s = float(kernel.outputscale)
    expected = s * math.exp(-0.5 * math.sin(math.radians(1.0)) ** 2 / ls**2)
    assert float(K[0, 1]) == pytest.approx(expected, rel=1e-12)
    assert float(K[1, 2]) == pytest.approx(expected, rel=1e-12)
    assert float(K[3, 4]) == pytest.approx(s, rel=1e-12)  # 0° and 360° are one


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_parameters_have_the_dtype_asked_for(dtype):
    kernel = default_preference_covar_module(3, dtype=dtype)
    assert {p.dtype for p in kernel.parameters()} == {dtype}
