r"""Log-space helpers for likelihoods built from normal cdfs.

Every function is elementwise (or reduces one trailing dimension), stable for
any finite input, and keeps gradients finite wherever the value is finite: the
branches of each ``torch.where`` are evaluated on inputs that are safe for
both, so a masked branch never injects ``nan`` into the backward pass.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from prefbo.utils.normal import log_phi

_LOG_HALF = -math.log(2.0)


def log1mexp(x: Tensor) -> Tensor:
    r"""``log(1 - exp(x))`` for ``x ≤ 0``, elementwise.

    Uses ``log(-expm1(x))`` for ``x > -log 2`` and ``log1p(-exp(x))`` below
    (Mächler, 2012), so it is accurate at both ends. ``x = 0`` gives ``-inf``.

    Args:
        x: A tensor of non-positive values, any shape.

    Returns:
        A tensor of ``x``'s shape.
    """
    near = x > _LOG_HALF
    x_near = torch.where(near, x, torch.full_like(x, _LOG_HALF))
    x_far = torch.where(near, torch.full_like(x, 2.0 * _LOG_HALF), x)
    return torch.where(near, torch.log(-torch.expm1(x_near)), torch.log1p(-x_far.exp()))


def log_ndtr_diff(upper: Tensor, lower: Tensor) -> Tensor:
    r"""``log(Φ(upper) - Φ(lower))`` for ``upper > lower``, elementwise.

    When the interval lies mostly above zero it is reflected,
    ``Φ(a) - Φ(b) = Φ(-b) - Φ(-a)``, so that both cdfs are evaluated where
    ``log Φ`` is accurate; then ``log Φ(a) + log1mexp(log Φ(b) - log Φ(a))``.
    Intervals narrower than ``1e-3 / (1 + |midpoint|)`` use the expansion
    ``2h φ(m) (1 + (m² − 1) h²/6)`` around the midpoint ``m`` (half-width
    ``h``), which keeps full relative precision as ``h → 0``. Computed in
    float64 whatever the input dtype, then cast back (in float32 the
    difference ``log Φ(b) − log Φ(a)`` of two large logs loses digits just
    above the series band).

    Args:
        upper: A tensor ``a``, any shape.
        lower: A tensor ``b < a``, broadcastable with ``upper``.

    Returns:
        A tensor of the broadcast shape.
    """
    upper, lower = torch.broadcast_tensors(upper, lower)
    dtype = torch.promote_types(upper.dtype, lower.dtype)
    upper, lower = upper.to(torch.float64), lower.to(torch.float64)
    flip = (upper + lower) > 0
    a = torch.where(flip, -lower, upper)
    b = torch.where(flip, -upper, lower)
    log_a = torch.special.log_ndtr(a)
    log_b = torch.special.log_ndtr(b)
    general = log_a + log1mexp((log_b - log_a).clamp_max(0.0))
    # narrow intervals: ∫_{m-h}^{m+h} φ = 2h φ(m) (1 + (m² − 1) h² / 6 + O(h⁴))
    half = (upper - lower) / 2
    mid = (upper + lower) / 2
    narrow = half * (1 + mid.abs()) < 1e-3
    half_n = torch.where(narrow, half, torch.full_like(half, 1e-3))
    series = (
        log_phi(mid)
        + torch.log(2 * half_n)
        + torch.log1p((mid * mid - 1) * half_n * half_n / 6)
    )
    return torch.where(narrow, series, general).to(dtype)


def _exclusive_cumsum(x: Tensor) -> Tensor:
    r"""``Σ_{i<j} x_i`` along the last dimension (no cancellation)."""
    zero = torch.zeros_like(x[..., :1])
    return torch.cat([zero, x[..., :-1]], dim=-1).cumsum(-1)


def log_any(log_p: Tensor, log_not_p: Tensor, mask: Tensor | None = None) -> Tensor:
    r"""``log(1 − Π_j (1 − p_j))`` over the last dimension, for independent events.

    The probability that at least one of independent events happens, summed
    by the first one that does: ``Σ_j p_j Π_{i<j} (1 − p_i)``. Every term is
    positive, so the log-sum-exp is accurate even when the result is
    astronomically small or close to one (no ``1 − x`` cancellation).

    Args:
        log_p: A ``... x J`` tensor of ``log p_j``.
        log_not_p: A ``... x J`` tensor of ``log(1 − p_j)``, computed by the
            caller without cancellation.
        mask: An optional ``J`` (or broadcastable) bool tensor; events where
            it is ``False`` are left out. At least one event must remain.

    Returns:
        A ``...`` tensor.
    """
    if mask is not None:
        log_p = torch.where(mask, log_p, -math.inf)
        log_not_p = torch.where(mask, log_not_p, 0.0)
    return torch.logsumexp(log_p + _exclusive_cumsum(log_not_p), dim=-1)


def log1m_prod_ndtr(z: Tensor, mask: Tensor | None = None) -> Tensor:
    r"""``log(1 − Π_j Φ(z_j))`` over the last dimension, stably.

    Args:
        z: A ``... x J`` tensor.
        mask: An optional bool tensor broadcastable to ``z``; entries where it
            is ``False`` are left out of the product.

    Returns:
        A ``...`` tensor.
    """
    return log_any(torch.special.log_ndtr(-z), torch.special.log_ndtr(z), mask)


def log_pareto_conflict(z: Tensor) -> Tensor:
    r"""``log(1 − Π_i Φ(z_i) − Π_i Φ(−z_i))`` over the last dimension.

    The probability that neither of two options dominates the other when each
    of ``d`` standardised utility differences ``z_i`` is perturbed by an
    independent standard normal (the conflict probability of
    :class:`~prefbo.likelihoods.ParetoPreferenceLikelihood`): the signs of
    ``z_i + ε_i`` are mixed. Summed over disjoint events with positive terms
    only — the first sign is negative and not all the others are, or the first
    negative sign comes at ``i ≥ 1`` — so it stays accurate when the
    probability is tiny.
    For ``d = 1`` the probability is exactly zero (``-inf``).

    Args:
        z: A ``... x d`` tensor of standardised differences.

    Returns:
        A ``...`` tensor.
    """
    if z.shape[-1] < 2:
        return torch.full_like(z[..., 0], -math.inf)
    lp = torch.special.log_ndtr(z)
    ln = torch.special.log_ndtr(-z)
    first = ln[..., 0] + log_any(lp[..., 1:], ln[..., 1:])
    later = ln[..., 1:] + _exclusive_cumsum(lp)[..., 1:]
    return torch.logsumexp(torch.cat([first.unsqueeze(-1), later], dim=-1), dim=-1)
