r"""The Laplace Newton system and EP's moments when the curvature is stiff.

The whitened system ``A = I + Lᵀ W L`` with ``W = Dᵀ diag(ω) D`` is formed and
factorised explicitly in the usual case. When the curvature of a comparison
dwarfs the prior (``ω_k (K_ww + K_ll)`` of order ``1/ε`` and above, e.g. a
probit at a tiny ``noise_std``), the entries of ``A`` are dominated by ``Lᵀ W
L`` and the prior's ``I`` is lost to rounding: the Cholesky factor of the
formed ``A`` is then backward stable for a perturbation of ``A`` of size
``ε ‖Lᵀ W L‖``, which is of the size of ``I`` itself. Posterior variances come
out wrong by ``O(ε ‖Lᵀ W L‖)`` (above the prior, or far below it), and the
factorisation fails once that exceeds 1.

There ``A`` is never formed. With ``H = D L`` (rows ``h_k``) and
``M = Ω⁻¹ + H Hᵀ``, ``A⁻¹ = I - Hᵀ M⁻¹ H = I - P`` (Woodbury), and ``P`` is
the orthogonal projector onto the column space of ``Hᵀ`` seen through the
Gram matrix ``M``: with the ``(n + m) x m`` matrix::

    Y = [Hᵀ diag(a); diag(b)],   a_k = √(ω_k / c_k),  b_k = √(1 / c_k),
    c_k = 1 + ω_k |h_k|²,

(unit columns, ``Yᵀ Y = diag(a) M diag(a)``) and its thin QR factorisation
``Y = Q R``, ``P = Q₁ Q₁ᵀ`` with ``Q₁`` the first ``n`` rows of ``Q``. No
matrix with entries of size ``ω`` is formed or inverted: the columns of ``Y``
are of unit norm, so Householder QR perturbs them by ``O(ε)`` only
(Golub & Van Loan 2013, sec. 5.2), ``P`` has its eigenvalues in ``[0, 1]`` up to
``O(ε)``, and ``Σ = L (I - P) Lᵀ`` stays between ``0`` and the prior to
working precision for any ``ω``, ``ω = ∞`` (an exact constraint
``f_w = f_l``) included. ``log det A = Σ_k log c_k + 2 Σ_k log |R_kk|``
(``det A = det Ω det M``).

A Newton step needs ``A⁻¹ g`` for ``g = Hᵀ γ - v`` with ``γ`` of the size of
``ω`` too; ``(I - P) Hᵀ γ`` would cancel to nothing. By the push-through
identity ``A⁻¹ Hᵀ = Hᵀ M⁻¹ Ω⁻¹ = Q₁ R⁻ᵀ diag(a) Ω⁻¹``, so
``A⁻¹ Hᵀ γ = Q₁ R⁻ᵀ t`` with ``t_k = a_k γ_k / ω_k`` of moderate size
(:func:`stiff_solve`). Where ``ω_k |h_k|²`` exceeds ``1/ε``, ``M``'s
``Ω⁻¹`` is held at ``ε/|h_k|²`` (``Σ`` moves by ``O(ε)``) and ``log det A``
gets ``log(c_k ε)`` back for each such comparison that is independent of the
ones before it (a repeated or cyclic one adds nothing as ``ω`` grows).

EP (:mod:`prefbo.inference.ep`) reads the same factors: its site precisions
are the ``ω``, and a site's cavity precision ``1 / h_kᵀ A₋ₖ⁻¹ h_k`` comes
from the row norms of ``Q`` without the cancelling ``1/q_k - ω_k``.
"""

from __future__ import annotations

import torch
from torch import Tensor

# ω_k (K_ww + K_ll) above which the formed A loses more than about
# ε · STIFF_LIMIT of the prior's information: the explicit-QR path is used
STIFF_LIMIT = {torch.float64: 1e6, torch.float32: 1e3}


def stiffness(omega: Tensor, comparisons: Tensor, prior_diag: Tensor) -> Tensor:
    r"""``max_k ω_k (K_ww + K_ll)`` per batch element.

    Args:
        omega: ``batch x m`` curvatures ``ω``.
        comparisons: ``batch x m x 2`` long ``[w, l]`` rows.
        prior_diag: ``batch x n`` diagonal of ``K``.

    Returns:
        ``batch`` (``0`` where there are no comparisons).
    """
    if omega.shape[-1] == 0:
        return omega.new_zeros(omega.shape[:-1])
    prior_diag = prior_diag.expand(comparisons.shape[:-2] + prior_diag.shape[-1:])
    var = prior_diag.gather(-1, comparisons[..., 0]) + prior_diag.gather(
        -1, comparisons[..., 1]
    )
    return (omega * var).amax(-1)


def is_stiff(omega: Tensor, comparisons: Tensor, prior_diag: Tensor) -> bool:
    r"""Whether any batch element's curvature is stiff (:data:`STIFF_LIMIT`)."""
    limit = STIFF_LIMIT.get(omega.dtype, STIFF_LIMIT[torch.float32])
    return bool((stiffness(omega, comparisons, prior_diag) > limit).any())


def stiff_projector(
    chol_prior: Tensor,
    omega: Tensor,
    comparisons: Tensor,
    max_condition: float | None = None,
) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    r"""``P = I - A⁻¹`` and ``log det A`` for ``A = I + Lᵀ Dᵀ diag(ω) D L``
    without forming ``A`` (see the module docstring).

    Args:
        chol_prior: ``batch x n x n`` lower factor ``L`` of ``K``.
        omega: ``batch x m`` curvatures ``ω ≥ 0`` (``+inf`` allowed).
        comparisons: ``batch x m x 2`` long ``[w, l]`` rows.
        max_condition: The cap on ``c_k = 1 + ω_k |h_k|²`` (default
            ``1/ε``, i.e. ``b_k ≥ √ε``). A finite curvature below the cap is
            used as it is; rounding in ``Y``'s ``Hᵀ`` block then perturbs the
            directions that nearly dependent comparisons leave free by
            ``O(ε / b_k)`` relatively (``O(√ε)`` at the default, ``ε^¼`` at
            ``ε^(-3/2)``).

    Returns:
        ``P`` (``batch x n x n``, symmetric, eigenvalues in ``[0, 1]``),
        ``log det A`` (``batch``) and the factors ``(Q₁, R, ω / a, q, τ₋)``:
        the first three for :func:`stiff_solve`; ``q_k = h_kᵀ A⁻¹ h_k``, the
        variance of ``f_w - f_l``, and ``τ₋_k = 1 / h_kᵀ A₋ₖ⁻¹ h_k``, its
        precision without comparison ``k`` (an EP cavity), both
        ``batch x m`` and accurate also where ``q_k`` is tiny.
    """
    L = chol_prior
    n, m = L.shape[-1], omega.shape[-1]
    batch = torch.broadcast_shapes(L.shape[:-2], omega.shape[:-1])
    L = L.expand(batch + (n, n))
    omega = omega.expand(batch + (m,))
    comps = comparisons.expand(batch + (m, 2))
    rows_w = L.gather(-2, comps[..., 0:1].expand(batch + (m, n)))
    rows_l = L.gather(-2, comps[..., 1:2].expand(batch + (m, n)))
    H = rows_w - rows_l  # batch x m x n, h_k = D_k L
    h2 = (H * H).sum(-1)
    c = 1.0 + omega * h2
    # M's Ω⁻¹ is kept at ≥ ε/|h|² (b ≥ √ε), which moves Σ by O(ε) only;
    # below that, rounding in the Hᵀ block of Y would outweigh b
    c_max = 1.0 / torch.finfo(L.dtype).eps if max_condition is None else max_condition
    capped = c > c_max
    c_q = c.clamp_max(c_max)
    omega_q = torch.where(capped, (c_q - 1.0) / h2, omega)
    a = (omega_q / c_q).sqrt()
    Y = torch.cat([H.mT * a.unsqueeze(-2), torch.diag_embed(c_q.rsqrt())], dim=-2)
    Q, R = torch.linalg.qr(Y)  # (n + m) x m, m x m
    Q1 = Q[..., :n, :]
    P = Q1 @ Q1.mT
    P = 0.5 * (P + P.mT)
    r = R.diagonal(dim1=-2, dim2=-1).abs()
    # a capped comparison independent of the ones before it (|R_kk| of the
    # order of 1, not of b) adds log(c / c_max) to log det A; a dependent
    # one (a repeat, a cycle) adds nothing more as ω grows
    independent = capped & (r > c_max**-0.25)
    extra = torch.where(independent, c.log() - c_q.log(), torch.zeros_like(c))
    logdet = (c_q.log() + extra).sum(-1) + 2 * r.log().sum(-1)
    scale = torch.where(omega > 0, omega / a, torch.ones_like(omega))
    q, loo = _pair_variances(Q, n, omega, omega_q, H, P)
    return P, logdet, (Q1, R, scale, q, loo)


def _pair_variances(
    Q: Tensor, n: int, omega: Tensor, omega_q: Tensor, H: Tensor, P: Tensor
) -> tuple[Tensor, Tensor]:
    r"""``q_k = h_kᵀ A⁻¹ h_k`` (the Laplace variance of ``f_w - f_l``) and
    ``τ₋_k = 1 / h_kᵀ A₋ₖ⁻¹ h_k`` (its precision without comparison ``k``).

    For a stiff comparison ``q_k ≈ 1/ω_k``: from ``P`` it would cancel to
    nothing; the columns of ``Y`` give it with relative accuracy,
    ``q_k = (1 - |Q₂[k]|²) / ω_k`` (``Q₂`` the last ``m`` rows of ``Q``: the
    rows of the orthogonal completion have unit norm), since
    ``|Q₂[k]|² = (M⁻¹)_kk / ω_k = 1 / (1 + ω_k h_kᵀ A₋ₖ⁻¹ h_k)``; the same
    identity gives ``τ₋_k = ω_k |Q₂[k]|² / (1 - |Q₂[k]|²)`` without the
    cancelling ``1/q_k - ω_k`` (``ω`` as capped in ``M``). Elsewhere
    (``ω_k |h_k|² ≤ 1``) ``h_kᵀ (I - P) h_k`` is used, accurate to
    ``O(ε |h_k|²)`` (absolutely: the difference of a soft comparison that
    stiff ones pin comes out near ``ε``, not at its true size), and
    ``τ₋_k = 1/q_k - ω_k``, which cancels by at most half there."""
    q2 = Q[..., n:, :].square().sum(-1)  # batch x m
    stiff = omega * (H * H).sum(-1) > 1.0
    ones = torch.ones_like(omega)
    from_q = (1.0 - q2) / torch.where(stiff, omega, ones)
    HP = H @ P  # rows h_kᵀ P (P is symmetric)
    from_p = (H * H).sum(-1) - (HP * H).sum(-1)
    q = torch.where(stiff, from_q, from_p)
    tiny = torch.finfo(q.dtype).tiny
    loo = torch.where(
        stiff,
        omega_q * q2 / (1.0 - q2).clamp_min(tiny),
        1.0 / q.clamp_min(tiny) - omega,
    )
    return q, loo


def stiff_solve(
    P: Tensor, factors: tuple[Tensor, Tensor, Tensor], gamma: Tensor, v: Tensor
) -> Tensor:
    r"""``A⁻¹ (Hᵀ γ - v)`` from :func:`stiff_projector`'s ``P`` and factors.

    Args:
        P: ``batch x n x n`` projector ``I - A⁻¹``.
        factors: ``(Q₁, R, ω / a, …)`` (the rest unused here).
        gamma: ``batch x m`` per-comparison gradients ``γ``.
        v: ``batch x n``.

    Returns:
        ``batch x n``.
    """
    Q1, R, scale = factors[:3]
    t = gamma / scale
    t = t.expand(R.shape[:-1])
    y = torch.linalg.solve_triangular(R.mT, t.unsqueeze(-1), upper=False)
    Pv = (P @ v.unsqueeze(-1)).squeeze(-1)
    return (Q1 @ y).squeeze(-1) - (v - Pv)
