r"""A fused Gram matrix for BoTorch's default preference kernel.

Every hyperparameter-fit evaluation of a pairwise model builds the prior
covariance ``K = s · exp(-½ |(x_i - x_j) / ℓ|²)`` of its designs and
back-propagates ``∂ evidence / ∂K`` into ``ℓ`` and ``s``. Through GPyTorch's
``ScaleKernel(RBFKernel)`` that backward is a chain of some twenty generic ops
(the quadratic expansion's matmul and concatenations, the clamp, ``exp``, the
scale); :class:`ScaledRBFGram` computes the same forward op for op and the
gradients in closed form instead:

- ``∂/∂s = Σᵢⱼ Gᵢⱼ Eᵢⱼ`` with ``E = exp(-½ D)``;
- ``∂/∂ℓₖ = Σᵢⱼ Hᵢⱼ (uᵢₖ - uⱼₖ)² / ℓₖ`` with ``H = G ∘ K`` and ``u = x / ℓ``,
  evaluated as ``Σᵢ uᵢₖ² (rᵢ + cᵢ) - 2 (uᵀ H u)ₖₖ`` (``r``, ``c`` the row and
  column sums of ``H``; ``u`` centred as in the forward).

It applies only where it gives the same numbers: a plain ``ScaleKernel`` over
a plain ``RBFKernel`` (:func:`~prefbo.kernels.rbf.is_plain_scaled_rbf`: not
subclasses, no ``active_dims``), inputs that do not require grad (a
learnable input transform falls back) and GPyTorch's trace mode off; anything
else goes through the module unchanged (:func:`prior_gram`).
"""

from __future__ import annotations

import torch
from gpytorch import settings
from gpytorch.kernels import Kernel
from torch import Tensor
from torch.autograd.function import once_differentiable

from prefbo.kernels.rbf import is_plain_scaled_rbf
from prefbo.utils.threads import limited


class ScaledRBFGram(torch.autograd.Function):
    r"""``s · exp(-½ |(xᵢ - xⱼ) / ℓ|²)`` at one set of inputs, with a closed-form
    backward for ``ℓ`` and ``s`` (the inputs get no gradient).

    The forward repeats GPyTorch's ``sq_dist`` (centred quadratic expansion,
    negative squares clamped to 0, the diagonal set to 0 when it would be
    there) so that the values are GPyTorch's to the last bit.
    """

    @staticmethod
    def forward(ctx, X, lengthscale, outputscale, zero_diagonal):  # noqa: D102
        with limited(X.shape[:-1].numel()):
            return ScaledRBFGram._forward(
                ctx, X, lengthscale, outputscale, zero_diagonal
            )

    @staticmethod
    def _forward(ctx, X, lengthscale, outputscale, zero_diagonal):
        u = X.div(lengthscale)
        u = u - u.mean(-2, keepdim=True)
        norm = u.pow(2).sum(-1, keepdim=True)
        pad = torch.ones_like(norm)
        D = torch.cat([-2.0 * u, norm, pad], -1).matmul(
            torch.cat([u, pad, norm], -1).transpose(-2, -1)
        )
        if zero_diagonal:
            D.diagonal(dim1=-2, dim2=-1).fill_(0)
        E = D.clamp_min_(0).div_(-2).exp_()
        scale = outputscale.view(*outputscale.shape, 1, 1)
        ctx.save_for_backward(u, E, lengthscale, scale)
        ctx.shapes = (lengthscale.shape, outputscale.shape)
        return E.mul(scale)

    @staticmethod
    @once_differentiable  # a second derivative would miss E's and u's terms
    def backward(ctx, grad):  # noqa: D102
        with limited(grad.shape[:-1].numel()):
            return ScaledRBFGram._backward(ctx, grad)

    @staticmethod
    def _backward(ctx, grad):
        u, E, lengthscale, scale = ctx.saved_tensors
        ls_shape, os_shape = ctx.shapes
        GE = grad * E
        grad_os = grad_ls = None
        if ctx.needs_input_grad[2]:
            grad_os = GE.sum((-2, -1)).sum_to_size(os_shape)
        if ctx.needs_input_grad[1]:
            H = GE.mul_(scale)  # G ∘ K
            rc = H.sum(-1) + H.sum(-2)  # batch x n
            Q = (u.pow(2) * rc.unsqueeze(-1)).sum(-2) - 2.0 * (u * (H @ u)).sum(-2)
            grad_ls = (Q.unsqueeze(-2) / lengthscale).sum_to_size(ls_shape)
        return None, grad_ls, grad_os, None


def _fused_lengthscale(covar_module: Kernel, X: Tensor) -> Tensor | None:
    r"""The lengthscale of a kernel :class:`ScaledRBFGram` computes exactly,
    ``None`` for any other kernel or inputs."""
    if (
        not is_plain_scaled_rbf(covar_module)
        or X.requires_grad
        or settings.trace_mode.on()
    ):
        return None
    lengthscale = covar_module.base_kernel.lengthscale
    return lengthscale if lengthscale.shape[-1] in (1, X.shape[-1]) else None


def prior_gram(covar_module: Kernel, X: Tensor) -> Tensor:
    r"""The dense prior covariance ``covar_module(X)`` at one set of inputs.

    :class:`ScaledRBFGram` for BoTorch's default ``ScaleKernel(RBFKernel)``,
    the module itself (evaluated at once, not lazily) for anything else.

    Args:
        covar_module: A GPyTorch kernel.
        X: ``batch_shape x n x d`` inputs (already transformed).

    Returns:
        ``batch_shape x n x n`` (the kernel's and the inputs' batch shapes
        broadcast).
    """
    lengthscale = _fused_lengthscale(covar_module, X)
    if lengthscale is None:
        with settings.lazily_evaluate_kernels(False):
            return covar_module(X).to_dense()
    # GPyTorch zeroes the diagonal's distances unless x / ℓ requires grad in
    # its generic path; its RBFCovariance path (one lengthscale) always
    ard_num_dims = covar_module.base_kernel.ard_num_dims
    ard = ard_num_dims is not None and ard_num_dims > 1
    zero_diagonal = not (ard and torch.is_grad_enabled() and lengthscale.requires_grad)
    return ScaledRBFGram.apply(X, lengthscale, covar_module.outputscale, zero_diagonal)
