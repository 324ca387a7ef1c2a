r"""Marginals of a whitened sparse variational GP at the latents answers touch.

With ``Q`` latent GPs ``g_q`` with inducing values ``u_q = g_q(Z)``, the
whitened variational distribution ``q(v_q) = N(m_q, S_q)``,
``u_q = L_q v_q`` (``L_q L_qᵀ = K_ZZ + jitter·I``), and ``A_q = L_q⁻¹ K_ZX``,
the marginal of ``g_q`` at inputs ``X`` is (Hensman et al. 2015; GPyTorch's
``VariationalStrategy``)

``mean = μ(X) + A_qᵀ m_q``,
``cov(a, b) = k(a, b) + jitter·[a = b] + A_q[:, a]ᵀ (S_q − I) A_q[:, b]``,

and utility ``j`` is ``f_j = Σ_q W[q, j] g_q`` with a mixing matrix ``W``
(``I`` for independent utilities, learned for the linear model of
coregionalisation). A preference answer touches ``p`` latents
``f_{o_i}(x_{a_i})``; :func:`whitened_answer_moments` returns the ``p x p``
covariance of those, per answer, without forming the covariance of all the
``u`` inputs: ``O(Q·M·u + Q·k·p²)`` memory for ``k`` answers.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from gpytorch.means import Mean
from gpytorch.settings import _linalg_dtype_cholesky
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor


def whitened_answer_moments(
    covar_module: Kernel,
    mean_module: Mean,
    inducing_points: Tensor,
    q_mean: Tensor,
    q_covariance: Tensor,
    X: Tensor,
    designs: Tensor,
    outputs: Tensor,
    mixing: Tensor,
    *,
    jitter: float,
    output_jitter: float = 0.0,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    r"""Joint marginal of the latents each answer touches under ``q``.

    Args:
        covar_module: The kernel of the latent GPs, batch shape ``[]`` or
            ``[Q]``.
        mean_module: Their prior mean, batch shape ``[]`` or ``[Q]``.
        inducing_points: ``[Q x] M x d`` inducing locations ``Z``.
        q_mean: ``[Q x] M`` whitened variational means ``m``.
        q_covariance: ``[Q x] M x M`` whitened variational covariances ``S``.
        X: A ``u x d`` tensor of inputs.
        designs: A ``k x p`` long tensor of rows of ``X``.
        outputs: A ``k x p`` long tensor of utilities in ``[0, t)``.
        mixing: ``W``, a ``Q x t`` tensor.
        jitter: Added to ``K_ZZ`` and to each latent GP's covariance at ``X``
            (GPyTorch's ``jitter_val``).
        output_jitter: Added to the utilities' covariance (GPyTorch's LMC
            strategy adds its ``jitter_val`` there).
        mask: An optional ``k x p`` bool tensor, ``False`` on padding slots,
            which get mean 0 and unit variance, independent of the rest.

    Returns:
        ``(mean, covariance)`` of shapes ``k x p`` and ``k x p x p``.
    """
    Q = mixing.shape[0]
    k_zz = covar_module(inducing_points).add_jitter(jitter).to_dense()  # [Q x] M x M
    chol_dtype = _linalg_dtype_cholesky.value()  # as GPyTorch: float64 by default
    chol = psd_safe_cholesky(k_zz.to(chol_dtype))
    k_zx = covar_module(inducing_points, X).to_dense()  # [Q x] M x u
    A = torch.linalg.solve_triangular(chol, k_zx.to(chol_dtype), upper=False)
    A = A.to(X.dtype)  # [Q x] M x u
    eye = torch.eye(q_covariance.shape[-1], dtype=X.dtype, device=X.device)
    B = (q_covariance - eye) @ A  # [Q x] M x u
    mean_q = mean_module(X) + (A * q_mean.unsqueeze(-1)).sum(-2)  # [Q x] u
    A, B = A.expand(Q, *A.shape[-2:]), B.expand(Q, *B.shape[-2:])  # Q x M x u
    mean_q = mean_q.expand(Q, X.shape[-2])  # Q x u
    k, p = designs.shape
    x_i = X[designs].unsqueeze(-2).expand(k, p, p, -1).reshape(k * p * p, -1)
    x_j = X[designs].unsqueeze(-3).expand(k, p, p, -1).reshape(k * p * p, -1)
    prior = covar_module(x_i, x_j, diag=True).expand(Q, k * p * p)
    same = designs.unsqueeze(-1) == designs.unsqueeze(-2)  # k x p x p
    update = torch.einsum("qmki,qmkj->qkij", A[..., designs], B[..., designs])
    cov_q = prior.reshape(Q, k, p, p) + jitter * same + update  # Q x k x p x p
    Wg = mixing[:, outputs]  # Q x k x p
    mean = (Wg * mean_q[:, designs]).sum(0)  # k x p
    cov = torch.einsum("qki,qkj,qkij->kij", Wg, Wg, cov_q)  # k x p x p
    if output_jitter:
        same_output = outputs.unsqueeze(-1) == outputs.unsqueeze(-2)
        cov = cov + output_jitter * (same & same_output)
    if mask is not None:
        mean = torch.where(mask, mean, torch.zeros_like(mean))
        both = mask.unsqueeze(-1) & mask.unsqueeze(-2)
        cov = torch.where(both, cov, torch.eye(p, dtype=cov.dtype, device=cov.device))
    return mean, cov
