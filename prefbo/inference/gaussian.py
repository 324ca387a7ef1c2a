r"""The Gaussian approximation of a pairwise preference GP's posterior.

Laplace (Rasmussen & Williams 2006, sec. 3.4; Chu & Ghahramani 2005) and EP
(Minka 2001) both approximate the posterior of the utilities ``f`` at the
designs by a Gaussian whose precision is ``K⁻¹ + Ŵ`` with ``Ŵ = Dᵀ diag(ω) D``
a weighted comparison Laplacian (the likelihood curvature at the mode, or the
site precisions). With ``K = L Lᵀ`` and ``C`` the lower factor of
``A = I + Lᵀ Ŵ L``, the predictive mean at ``x*`` is ``k*ᵀ α`` with
``α = K⁻¹ f̂`` and the covariance ``k** - uᵀu + wᵀw`` with ``u = L⁻¹ k*`` and
``w = (L C)⁻¹ k*``. Where the curvature is stiff
(:mod:`prefbo.inference.stiff`) ``A`` is not factorised: the approximation
holds ``P = I - A⁻¹`` instead, and the covariance is ``k** - uᵀ P u``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from prefbo.exceptions import UnsupportedError
from prefbo.inference.laplacian import comparison_laplacian, laplacian_matmul


@dataclass(eq=False)
class GaussianApproximation:
    r"""A Gaussian approximation ``N(f̂, (K⁻¹ + Ŵ)⁻¹)`` of the utilities'
    posterior at the designs, for a batch of problems: the Laplace
    approximation at the mode, or EP's approximation with ``f̂`` its mean and
    ``Ŵ`` built from its sites.

    Attributes:
        mode: ``batch_shape x n`` mode ``f̂`` of the utilities at the designs.
        chol_prior: ``batch_shape x n x n`` lower factor ``L`` of ``K``.
        alpha: ``batch_shape x n`` vector ``K⁻¹ f̂``.
        curvature: ``batch_shape x m`` weights ``ω`` with ``Ŵ = Dᵀ diag(ω) D``.
        comparisons: ``batch_shape x m x 2`` the comparisons.
        log_likelihood: ``batch_shape`` value of ``log p(D | f̂)``.
        evidence: ``batch_shape`` Laplace log evidence.
        converged: ``batch_shape`` bool, whether Newton met its tolerance.
        iterations: Newton iterations taken.
        form: ``"whitened"`` or ``"precision"``, the form Newton ran in.
    """

    mode: Tensor
    chol_prior: Tensor
    alpha: Tensor
    curvature: Tensor
    comparisons: Tensor
    log_likelihood: Tensor
    evidence: Tensor
    converged: Tensor
    iterations: int
    form: str
    _chol_post: Tensor | None = None
    _post_cov: Tensor | None = None
    _pred_factors: Tensor | None = None
    _mode_derivatives: tuple[Tensor, Tensor] | None = None
    _projector: Tensor | None = None  # P = I - A⁻¹ for a stiff curvature
    _stiff_factors: tuple | None = None  # and stiff_projector's factors

    def laplacian(self) -> Tensor:
        r"""``batch_shape x n x n`` curvature ``Ŵ`` at the mode."""
        return comparison_laplacian(
            self.curvature, self.comparisons, self.mode.shape[-1]
        )

    @property
    def chol_post(self) -> Tensor:
        r"""``batch_shape x n x n`` lower factor ``C`` of ``A = I + Lᵀ Ŵ L``.

        Raises:
            UnsupportedError: For a stiff curvature, whose state holds
                ``P = I - A⁻¹`` instead: ``A`` formed in floating point
                loses ``I`` to rounding (use :meth:`projected_reduction`,
                :meth:`covariance_root` or :meth:`posterior_covariance`).
        """
        if self._chol_post is None and self._projector is not None:
            raise UnsupportedError(
                "this approximation's curvature is stiff: it holds P = I - A⁻¹, "
                "not the factor C of A = I + LᵀŴL, which would lose the prior to "
                "rounding; use projected_reduction(), covariance_root() or "
                "posterior_covariance()."
            )
        if self._chol_post is None:
            L = self.chol_prior
            A = L.transpose(-1, -2) @ laplacian_matmul(
                self.curvature, self.comparisons, L
            )
            A.diagonal(dim1=-2, dim2=-1).add_(1.0)
            self._chol_post, _ = torch.linalg.cholesky_ex(A)
        return self._chol_post

    def predictive_factors(self) -> Tensor:
        r"""``batch_shape x 2 x n x n`` stack of ``L`` and ``L C`` (cached).

        Raises:
            UnsupportedError: For a stiff curvature (see :attr:`chol_post`).
        """
        if self._pred_factors is None:
            self._pred_factors = torch.stack(
                [self.chol_prior, self.chol_prior @ self.chol_post], dim=-3
            )
        return self._pred_factors

    def covariance_root(self) -> Tensor:
        r"""``batch_shape x n x n`` factor ``F = L C⁻ᵀ`` of the posterior
        covariance ``(K⁻¹ + Ŵ)⁻¹ = F Fᵀ`` at the designs (for a stiff
        curvature ``F = L V Λ^½`` with ``I - P = V Λ Vᵀ``, ``Λ ≥ 0``)."""
        if self._projector is not None:
            evals, evecs = torch.linalg.eigh(self._complement())
            return self.chol_prior @ (evecs * evals.clamp_min(0).sqrt().unsqueeze(-2))
        return torch.linalg.solve_triangular(
            self.chol_post, self.chol_prior.transpose(-1, -2), upper=False
        ).transpose(-1, -2)

    def posterior_covariance(self) -> Tensor:
        r"""``batch_shape x n x n`` Laplace covariance ``Σ = (K⁻¹ + Ŵ)⁻¹``."""
        if self._post_cov is None and self._projector is not None:
            L = self.chol_prior
            S = L @ self._complement() @ L.mT
            self._post_cov = 0.5 * (S + S.mT)
        if self._post_cov is None:
            F = self.covariance_root()
            self._post_cov = F @ F.transpose(-1, -2)
        return self._post_cov

    def projected_reduction(self) -> Tensor | None:
        r"""For a stiff curvature the ``n x n`` matrix ``-L⁻ᵀ P L⁻¹``
        (``= (L C)⁻ᵀ (L C)⁻¹ - L⁻ᵀ L⁻¹``, the predictive covariance being
        ``k** + k*ᵀ (·) k*``) from ``P`` without ``C``; ``None`` otherwise."""
        if self._projector is None:
            return None
        Lt = self.chol_prior.mT
        S = torch.linalg.solve_triangular(Lt, self._projector, upper=True)
        M = torch.linalg.solve_triangular(Lt, S.mT, upper=True)  # L⁻ᵀ P L⁻¹
        return -0.5 * (M + M.mT)

    def _complement(self) -> Tensor:
        r"""``A⁻¹ = I - P`` of a stiff curvature."""
        P = self._projector
        eye = torch.eye(P.shape[-1], dtype=P.dtype, device=P.device)
        return eye - P
