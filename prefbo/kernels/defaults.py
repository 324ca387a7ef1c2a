r"""Default covariance module, identical to BoTorch ``PairwiseGP``'s."""

from __future__ import annotations

import torch
from gpytorch.constraints import GreaterThan, Interval
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.priors import GammaPrior, SmoothedBoxPrior

OUTPUTSCALE_BOUNDS = (1e-2, 1e2)


def default_preference_covar_module(
    dim: int,
    batch_shape: torch.Size = torch.Size(),
    dtype: torch.dtype = torch.float64,
) -> ScaleKernel:
    r"""``ScaleKernel(RBFKernel(ARD))`` with BoTorch ``PairwiseGP``'s priors.

    Lengthscale prior ``Gamma(2.4, 2.7)`` starting at its mode, constrained
    ``≥ 1e-4`` (untransformed); outputscale prior ``SmoothedBox(0.01, 100)``
    constrained to ``[0.005, 200]``, starting at 1.

    Args:
        dim: Number of input features (one lengthscale each).
        batch_shape: Batch shape of the hyperparameters.
        dtype: Parameter dtype.

    Returns:
        The covariance module.
    """
    lo, hi = OUTPUTSCALE_BOUNDS
    ls_prior = GammaPrior(concentration=2.4, rate=2.7)
    ls_mode = (ls_prior.concentration - 1) / ls_prior.rate
    return ScaleKernel(
        RBFKernel(
            batch_shape=batch_shape,
            ard_num_dims=dim,
            lengthscale_prior=ls_prior,
            lengthscale_constraint=GreaterThan(
                lower_bound=1e-4, transform=None, initial_value=ls_mode
            ),
            dtype=dtype,
        ),
        batch_shape=batch_shape,
        outputscale_prior=SmoothedBoxPrior(a=lo, b=hi),
        outputscale_constraint=Interval(
            lower_bound=lo * 0.5, upper_bound=hi * 2.0, initial_value=1.0
        ),
        dtype=dtype,
    )
