r"""The Laplace log evidence, differentiable in the prior covariance.

At the mode ``f̂`` the Laplace approximation of the log evidence is
``log p(D|f̂) - ½ f̂ᵀK⁻¹f̂ - ½ log|I + K Ŵ|`` (Rasmussen & Williams 2006,
eq. 3.32). :class:`LaplaceEvidence` makes it a differentiable function of
``K`` whose backward is the analytic gradient, including the dependence of
``f̂`` on ``K`` (implicit function theorem; R&W alg. 5.1);
:func:`evidence_kernel_gradient` is shared with EP's evidence.
"""

from __future__ import annotations

import torch
from torch import Tensor

from prefbo.inference.cholesky import jittered_cholesky
from prefbo.inference.gaussian import GaussianApproximation
from prefbo.inference.laplace import find_mode
from prefbo.inference.laplacian import (
    laplacian_index,
    laplacian_sandwich,
    pair_quadratic,
    scatter_laplacian_,
    scatter_pairs,
)
from prefbo.inference.stiff import stiff_solve
from prefbo.likelihoods.pairwise import PairwiseLikelihood
from prefbo.utils.threads import limited


class LaplaceEvidence(torch.autograd.Function):
    r"""Laplace log evidence as a differentiable function of the prior
    covariance ``K``.

    Forward finds the mode (warm-started) and returns the ``batch_shape``
    evidence. Backward returns ``∂ log Z / ∂K = ½ (ααᵀ - R + αbᵀ + bαᵀ)`` with
    ``R = (K + Ŵ⁻¹)⁻¹ = Ŵ - Ŵ Σ Ŵ`` (``Σ = (K⁻¹ + Ŵ)⁻¹``) and
    ``b = (I + ŴK)⁻¹ s = s - ŴΣs``, ``s_j = -½ ∂ log|I + KŴ| / ∂f̂_j``: the
    second pair of terms is the implicit dependence of the mode on ``K``.
    """

    @staticmethod
    def forward(ctx, K, comparisons, likelihood, init, options, out):  # noqa: D102
        with limited(K.shape[:-1].numel()):
            L = jittered_cholesky(K.detach(), name="prior covariance K")
            state = find_mode(L, comparisons, likelihood, init, **options)
        out["state"] = state
        ctx.state = state
        ctx.likelihood = likelihood
        return state.evidence.clone()

    @staticmethod
    def backward(ctx, grad_out):  # noqa: D102
        with limited(ctx.state.mode.shape.numel()):
            return LaplaceEvidence._backward(ctx, grad_out)

    @staticmethod
    def _backward(ctx, grad_out):
        state: GaussianApproximation = ctx.state
        comps = state.comparisons
        if state._mode_derivatives is not None:
            omega, domega = state._mode_derivatives
        else:
            _, _, omega, domega = ctx.likelihood.derivatives(state.mode, comps)
        n = state.mode.shape[-1]
        if state._projector is not None:  # stiff: see prefbo.inference.stiff
            M = _stiff_kernel_gradient(state, _stiff_implicit(state, domega))
            return M.mul_((0.5 * grad_out)[..., None, None]), *(None,) * 5
        q = pair_quadratic(state.posterior_covariance(), comps)  # a_kᵀ Σ a_k
        s = -0.5 * scatter_pairs(q * domega, comps, n)  # batch x n
        M = evidence_kernel_gradient(state, omega, s)
        return M.mul_((0.5 * grad_out)[..., None, None]), None, None, None, None, None


def _stiff_implicit(state: GaussianApproximation, domega: Tensor) -> Tensor:
    r"""``b = (I + WK)⁻¹ Dᵀ γ = L⁻ᵀ A⁻¹ Hᵀ γ`` for a stiff Laplace curvature,
    with ``γ_k = -½ q_k ∂ω_k`` (``q_k = a_kᵀ Σ a_k`` from the factors,
    accurate where it is tiny), without ``W``'s huge entries."""
    P, factors, L = state._projector, state._stiff_factors, state.chol_prior
    gamma = -0.5 * factors[3] * domega
    Ainv_g = stiff_solve(P, factors, gamma, torch.zeros_like(state.alpha))
    return torch.linalg.solve_triangular(
        L.mT, Ainv_g.unsqueeze(-1), upper=True
    ).squeeze(-1)


def _stiff_kernel_gradient(state: GaussianApproximation, b: Tensor | None) -> Tensor:
    r"""``ααᵀ - R + αbᵀ + bαᵀ`` for a stiff curvature, with
    ``R = (K + W⁻¹)⁻¹ = L⁻ᵀ P L⁻¹`` from the projector (``b = None``: no
    implicit term, EP at convergence)."""
    a = state.alpha
    M = state.projected_reduction()  # -R
    if b is None:
        return (M + a.unsqueeze(-1) * a.unsqueeze(-2)).contiguous()
    U = torch.stack([a, b], dim=-1)
    V = torch.stack([a + b, a], dim=-1)
    return (M + U @ V.mT).contiguous()


def evidence_kernel_gradient(
    state: GaussianApproximation, omega: Tensor, implicit: Tensor | None = None
) -> Tensor:
    r"""``2 ∂ log Z / ∂K = ααᵀ - R + αbᵀ + bαᵀ`` for a Gaussian approximation.

    ``R = (K + W⁻¹)⁻¹ = W - WΣW`` with ``W = Dᵀ diag(ω) D`` and
    ``Σ = (K⁻¹ + W)⁻¹``; ``b = (I + WK)⁻¹ s = s - WΣs`` carries the implicit
    dependence of the approximation on ``K`` (Laplace: ``s = -½ ∂ log|I+KW| /
    ∂f̂``; EP at convergence: none, ``implicit=None``). For a stiff
    curvature (the state holds ``P``) ``R = L⁻ᵀ P L⁻¹``, with no implicit
    term (:func:`_stiff_kernel_gradient`).

    Args:
        state: The approximation (``alpha`` = ``K⁻¹`` times its mean).
        omega: ``batch_shape x m`` weights of ``W``.
        implicit: Optional ``batch_shape x n`` vector ``s``.

    Returns:
        ``batch_shape x n x n``.
    """
    if state._projector is not None and implicit is None:
        return _stiff_kernel_gradient(state, None)
    comps = state.comparisons
    S = state.posterior_covariance()
    n = S.shape[-1]
    WS, WSW = laplacian_sandwich(omega, comps, S)  # W Σ, W Σ W
    a = state.alpha
    if implicit is None:
        b = torch.zeros_like(a)
    else:
        b = implicit - (WS @ implicit.unsqueeze(-1)).squeeze(-1)
    # M = ααᵀ + αbᵀ + bαᵀ - R = [α, b] [α + b, α]ᵀ - W + WΣW, built in place on
    # the fresh WΣW (-W scattered at its 4m entries, no dense W pass)
    batch = WSW.shape[:-2]
    M = WSW.contiguous()
    scatter_laplacian_(
        M.view(batch + (n * n,)),
        -omega.expand(batch + omega.shape[-1:]),
        laplacian_index(comps.expand(batch + comps.shape[-2:]), n),
    )
    U = torch.stack([a, b], dim=-1).expand(batch + (n, 2))
    V = torch.stack([a + b, a], dim=-1).expand(batch + (n, 2))
    M3 = M.view((-1, n, n))
    M3.baddbmm_(U.reshape((-1, n, 2)), V.reshape((-1, n, 2)).transpose(-1, -2))
    return M


def laplace_evidence(
    K: Tensor,
    comparisons: Tensor,
    likelihood: PairwiseLikelihood,
    init: Tensor | None = None,
    **options,
) -> tuple[Tensor, GaussianApproximation]:
    r"""Laplace log evidence, differentiable in ``K``, and the state at the mode.

    Args:
        K: ``batch_shape x n x n`` prior covariance of the utilities at the
            designs (may require grad).
        comparisons: ``batch_shape x m x 2`` long ``[winner, loser]`` rows.
        likelihood: The pairwise likelihood.
        init: Optional ``batch_shape x n`` warm start.
        **options: Passed to :func:`~prefbo.inference.find_mode`.

    Returns:
        ``(evidence, state)``: a ``batch_shape`` tensor and the
        :class:`~prefbo.inference.GaussianApproximation`.
    """
    out: dict = {}
    evidence = LaplaceEvidence.apply(K, comparisons, likelihood, init, options, out)
    return evidence, out["state"]
