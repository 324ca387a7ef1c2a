r"""Stable standard-normal functions for probit likelihoods.

``log Φ`` comes from :func:`torch.special.log_ndtr`. The inverse Mills ratio
``λ(z) = φ(z)/Φ(z)``, the probit curvature ``w(z) = λ(z)(z + λ(z))`` and its
derivative are computed in three regions, all in float64 whatever the input
dtype, so that ``z + λ`` never suffers the cancellation of ``λ ≈ -z``:

- ``z ≥ -5``: directly from ``exp(log φ - log Φ)``;
- ``-100 ≤ z < -5``: from the Laplace continued fraction of the Mills ratio,
  ``z + λ(z) = 1 / (t + 2 / (t + 3 / (t + …)))`` with ``t = -z``;
- ``z < -100``: from the asymptotic series
  ``z + λ = 1/t - 2/t³ + 10/t⁵ - 74/t⁷ + 706/t⁹`` and
  ``w' = -(2/t³)(1 - 12/t² + 150/t⁴ - 2072/t⁶)``.

Nothing is clamped: the derivatives are accurate for any finite ``z``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_CF_Z = -5.0
_SERIES_Z = -100.0
_CF_DEPTH = 48


def log_phi(z: Tensor) -> Tensor:
    r"""Log density of the standard normal, elementwise."""
    return -0.5 * z * z - _LOG_SQRT_2PI


def _cf_z_plus_lambda(t: Tensor) -> Tensor:
    r"""``z + λ(z)`` at ``z = -t`` (``t ≥ 5``) by the continued fraction."""
    acc = t
    for k in range(_CF_DEPTH, 1, -1):
        acc = t + k / acc
    return 1.0 / acc


def probit_terms(z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""Log-likelihood and its first three z-derivatives for ``log Φ(z)``.

    Args:
        z: A tensor of any shape (any floating dtype).

    Returns:
        A tuple ``(log Φ(z), λ(z), w(z), w'(z))`` in ``z``'s dtype, where
        ``λ = d/dz log Φ``, ``w = -d²/dz² log Φ = λ(z + λ)`` (in ``(0, 1)``) and
        ``w' = dw/dz = -d³/dz³ log Φ = λ - w (z + 2λ)``.
    """
    dtype = z.dtype
    z = z.to(torch.float64)
    logcdf = torch.special.log_ndtr(z)
    tail = z < _CF_Z
    # on the CPU the check is free: with no z in the tail (the usual case)
    # log Φ(z) is reused for λ and no tail branch is built
    any_tail = z.device.type != "cpu" or bool(tail.any())
    z_direct, logcdf_direct = z, logcdf
    if any_tail:
        z_direct = torch.where(tail, torch.zeros_like(z), z)
        logcdf_direct = torch.special.log_ndtr(z_direct)
    lam = torch.exp(log_phi(z_direct) - logcdf_direct)
    zl = z_direct + lam
    if any_tail:
        far = z < _SERIES_Z
        t = torch.where(tail, -z, torch.full_like(z, -_CF_Z))
        t_cf = torch.where(far, torch.full_like(z, -_CF_Z), t)
        u = 1.0 / (t * t)
        zl_series = (1.0 + u * (-2.0 + u * (10.0 + u * (-74.0 + u * 706.0)))) / t
        zl_tail = torch.where(far, zl_series, _cf_z_plus_lambda(t_cf))
        zl = torch.where(tail, zl_tail, zl)
        lam = torch.where(tail, t + zl_tail, lam)
    w = lam * zl
    dw = lam - w * (zl + lam)
    if any_tail:
        dw_series = -2.0 * u / t * (1.0 + u * (-12.0 + u * (150.0 - 2072.0 * u)))
        dw = torch.where(far, dw_series, dw)
    return logcdf.to(dtype), lam.to(dtype), w.to(dtype), dw.to(dtype)


def logit_terms(z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""Log-likelihood and its first three z-derivatives for ``log σ(z)``.

    Args:
        z: A tensor of any shape.

    Returns:
        ``(log σ(z), σ(-z), σ(z)σ(-z), σ(z)σ(-z)(σ(-z) - σ(z)))``: the log
        likelihood, its derivative, its negative second derivative ``w`` and
        ``w' = dw/dz``.
    """
    logp = torch.nn.functional.logsigmoid(z)
    s_pos = torch.sigmoid(z)
    s_neg = torch.sigmoid(-z)
    w = s_pos * s_neg
    return logp, s_neg, w, w * (s_neg - s_pos)


def ndtri_exp(y: Tensor) -> Tensor:
    r"""The ``x`` with ``log Φ(x) = y`` (inverse of ``log_ndtr``), elementwise.

    Like :func:`scipy.special.ndtri_exp`: accurate also where ``exp(y)``
    underflows (``y`` down to ``-1e300``) and where ``Φ(x)`` rounds to one.
    Computed in float64 whatever the input dtype: ``ndtri`` of ``exp(y)``
    (``-ndtri(-expm1(y))`` for ``y > -log 2``), an asymptotic start
    ``x ≈ −√(−2y − log(−2y) − log 2π)`` where ``exp(y)`` underflows, then
    Newton steps on ``log Φ(x) − y`` below ``-log 2``. The gradient is the
    exact ``dx/dy = Φ(x)/φ(x)`` (one differentiable Newton step at the root).

    Args:
        y: A tensor of values ``≤ 0`` (``0`` gives ``+inf``), any shape.

    Returns:
        A tensor of ``y``'s shape and dtype.
    """
    dtype = y.dtype
    y64 = y.to(torch.float64).clamp_max(0.0)
    with torch.no_grad():
        yd = y64.detach()
        upper = yd > -math.log(2.0)
        y_up = torch.where(upper, yd, torch.full_like(yd, -1.0))
        y_lo = torch.where(upper, torch.full_like(yd, -1.0), yd)
        x_up = -torch.special.ndtri(-torch.expm1(y_up))
        far = y_lo < -700.0
        t = -2.0 * torch.where(far, y_lo, torch.full_like(yd, -700.0))
        x_far = -(t - t.log() - math.log(2.0 * math.pi)).sqrt()
        x_lo = torch.where(far, x_far, torch.special.ndtri(y_lo.exp()))
        for _ in range(4 if bool(far.any()) or x_lo.device.type != "cpu" else 1):
            lam = torch.exp(log_phi(x_lo) - torch.special.log_ndtr(x_lo))
            x_lo = x_lo - (torch.special.log_ndtr(x_lo) - y_lo) / lam
        x = torch.where(upper, x_up, x_lo)
    if not y64.requires_grad:
        return x.to(dtype)
    finite = torch.isfinite(x)
    x_safe = torch.where(finite, x, torch.zeros_like(x))
    lam = torch.exp(log_phi(x_safe) - torch.special.log_ndtr(x_safe)).clamp_min(
        torch.finfo(torch.float64).tiny
    )
    y_safe = torch.where(finite, y64, torch.special.log_ndtr(x_safe))
    step = (y_safe - torch.special.log_ndtr(x_safe).detach()) / lam.detach()
    return torch.where(finite, x_safe + step, x).to(dtype)
