r"""Default covariance module, identical to BoTorch ``PairwiseGP``'s."""

from __future__ import annotations

import torch
from gpytorch.constraints import GreaterThan, Interval
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.priors import GammaPrior, SmoothedBoxPrior

from prefbo.exceptions import InputDataError

OUTPUTSCALE_BOUNDS = (1e-2, 1e2)


def default_preference_covar_module(
    dim: int,
    batch_shape: torch.Size = torch.Size(),
    dtype: torch.dtype = torch.float64,
    outputscale_bounds: tuple[float, float] = OUTPUTSCALE_BOUNDS,
) -> ScaleKernel:
    r"""``ScaleKernel(RBFKernel(ARD))`` with BoTorch ``PairwiseGP``'s priors.

    Lengthscale prior ``Gamma(2.4, 2.7)`` starting at its mode, constrained
    ``≥ 1e-4`` (untransformed); outputscale prior ``SmoothedBox(lo, hi)``
    (BoTorch: ``(0.01, 100)``) constrained to ``[lo / 2, 2 hi]``, starting
    at 1.

    Args:
        dim: Number of input features (one lengthscale each).
        batch_shape: Batch shape of the hyperparameters.
        dtype: Parameter dtype.
        outputscale_bounds: ``(lo, hi)`` of the outputscale's box prior,
            ``0 < lo < 1 < hi``; default BoTorch's ``(0.01, 100)``.

    Returns:
        The covariance module.

    Raises:
        InputDataError: If ``outputscale_bounds`` is not ``0 < lo < 1 < hi``
            (the outputscale starts at 1).
    """
    try:
        lo, hi = (float(b) for b in outputscale_bounds)
    except (TypeError, ValueError):
        lo = hi = float("nan")
    if not 0.0 < lo < 1.0 < hi < float("inf"):
        raise InputDataError(
            "outputscale_bounds must be (lo, hi) with 0 < lo < 1 < hi (the "
            f"outputscale starts at 1); got {outputscale_bounds!r}."
        )
    ls_prior = GammaPrior(concentration=2.4, rate=2.7)
    ls_mode = (ls_prior.concentration - 1) / ls_prior.rate
    kernel = ScaleKernel(
        RBFKernel(
            batch_shape=batch_shape,
            ard_num_dims=dim,
            lengthscale_prior=ls_prior,
            lengthscale_constraint=GreaterThan(
                lower_bound=1e-4, transform=None, initial_value=ls_mode
            ),
        ),
        batch_shape=batch_shape,
        outputscale_prior=SmoothedBoxPrior(a=lo, b=hi),
        outputscale_constraint=Interval(
            lower_bound=lo * 0.5, upper_bound=hi * 2.0, initial_value=1.0
        ),
    )
    return kernel.to(dtype)  # gpytorch's kernels take no dtype argument
