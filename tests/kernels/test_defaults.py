import torch
from botorch.models import PairwiseGP

from prefbo import PairwiseLaplaceGP
from prefbo.kernels import default_preference_covar_module


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
