r"""BoTorch's default preference kernel, ``ScaleKernel(RBFKernel)``, read and
evaluated directly.

The kernel ``k(x, x') = s · exp(-½ |(x - x') / ℓ|²)`` is simple enough to be
written out where GPyTorch's generic modules cost more than its arithmetic
(the fused Gram matrix of :mod:`prefbo.kernels.fused`, the closed-form EUBO
moments of :mod:`prefbo.acquisition.pair_moments`). Both apply only to a
*plain* ``ScaleKernel(RBFKernel)``, :func:`is_plain_scaled_rbf`: subclasses
and ``active_dims`` go through the module unchanged.
"""

from __future__ import annotations

import numpy as np
import torch
from gpytorch.kernels import Kernel, RBFKernel, ScaleKernel
from torch import Tensor


def is_plain_scaled_rbf(covar_module: object) -> bool:
    r"""Whether ``covar_module`` is exactly ``ScaleKernel(RBFKernel)``.

    Exact types (not subclasses), and no ``active_dims`` on either kernel.

    Args:
        covar_module: Any object, typically a GPyTorch kernel.

    Returns:
        ``True`` for a plain ``ScaleKernel`` over a plain ``RBFKernel``.
    """
    if type(covar_module) is not ScaleKernel or covar_module.active_dims is not None:
        return False
    base = covar_module.base_kernel
    return type(base) is RBFKernel and base.active_dims is None


def scaled_rbf_hyperparameters(covar_module: Kernel) -> tuple[Tensor, Tensor] | None:
    r"""``(outputscale, lengthscale)`` of an unbatched plain ``ScaleKernel(RBFKernel)``.

    Args:
        covar_module: A GPyTorch kernel.

    Returns:
        The detached scalar outputscale ``s`` and the ``d`` (or ``1``)
        lengthscales ``ℓ``; ``None`` unless :func:`is_plain_scaled_rbf` and
        the hyperparameters have no batch shape.
    """
    if not is_plain_scaled_rbf(covar_module):
        return None
    scale = covar_module.outputscale.detach()
    ls = covar_module.base_kernel.lengthscale.detach()
    if scale.ndim != 0 or ls.shape[:-2].numel() != 1:  # batched hyperparameters
        return None
    return scale, ls.reshape(-1)


def scaled_rbf(
    A: Tensor | np.ndarray,
    B: Tensor | np.ndarray,
    B_sq: Tensor | np.ndarray,
    outputscale: Tensor | np.ndarray | float,
) -> Tensor | np.ndarray:
    r"""``s · exp(-½ |a - b|²)`` of scaled points, in torch or NumPy.

    The inputs are already divided by the lengthscales and centred (on any
    common point, e.g. the mean of ``B``'s rows, which keeps the quadratic
    expansion ``|a|² + |b|² - 2 a·b`` accurate); negative squared distances
    from rounding are clamped to 0, as GPyTorch does.

    Args:
        A: ``batch_shape x m x d`` scaled, centred points.
        B: ``n x d`` scaled, centred points.
        B_sq: ``n`` squared norms of ``B``'s rows.
        outputscale: ``s``.

    Returns:
        ``batch_shape x m x n`` kernel values, a tensor for tensors and an
        array for arrays.
    """
    if isinstance(A, Tensor):
        # A.square(), not A * A: the same values, but autograd then adds two
        # terms into A's gradient instead of three (a different rounding)
        sq = A.square().sum(-1, keepdim=True) + B_sq - 2.0 * (A @ B.transpose(-1, -2))
        return outputscale * torch.exp(-0.5 * sq.clamp_min(0))
    sq = (A * A).sum(-1)[..., None] + B_sq - 2.0 * (A @ B.swapaxes(-1, -2))
    return outputscale * np.exp(-0.5 * np.maximum(sq, 0))
