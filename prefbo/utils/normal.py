r"""Stable standard-normal functions for probit likelihoods.

``log Φ`` comes from :func:`torch.special.log_ndtr`. The inverse Mills ratio
``λ(z) = φ(z)/Φ(z)`` and the probit curvature ``w(z) = λ(z)(z + λ(z))`` are
computed directly for ``z ≥ -5`` and, below, from the Laplace continued fraction
of the Mills ratio, which gives ``z + λ(z)`` without the catastrophic
cancellation of ``z + λ`` when ``λ ≈ -z`` (see Abramowitz & Stegun 26.2.14):

    z + λ(z) = 1 / (t + 2 / (t + 3 / (t + 4 / ...))),   t = -z.

Nothing is clamped: the derivatives are exact for any finite ``z``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_TAIL_Z = -5.0
_CF_DEPTH = 60


def log_phi(z: Tensor) -> Tensor:
    r"""Log density of the standard normal, elementwise."""
    return -0.5 * z * z - _LOG_SQRT_2PI


def _tail_z_plus_lambda(t: Tensor) -> Tensor:
    r"""``z + λ(z)`` at ``z = -t`` for ``t ≥ 5`` by the continued fraction."""
    acc = t
    for k in range(_CF_DEPTH, 1, -1):
        acc = t + k / acc
    return 1.0 / acc


def probit_terms(z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""Log-likelihood and its first three z-derivatives for ``log Φ(z)``.

    Args:
        z: A tensor of any shape (any floating dtype).

    Returns:
        A tuple ``(log Φ(z), λ(z), w(z), w'(z))`` where ``λ = d/dz log Φ``,
        ``w = -d²/dz² log Φ = λ(z + λ)`` (in ``(0, 1)``) and
        ``w' = dw/dz = -d³/dz³ log Φ = λ - w (z + 2λ)``; all of ``z``'s shape.
    """
    logcdf = torch.special.log_ndtr(z)
    tail = z < _TAIL_Z
    # Direct branch (evaluated on a safe value where the tail branch is used).
    z_direct = torch.where(tail, torch.zeros_like(z), z)
    lam_direct = torch.exp(log_phi(z_direct) - torch.special.log_ndtr(z_direct))
    zl_direct = z_direct + lam_direct
    # Tail branch (evaluated on a safe value where the direct branch is used).
    t = torch.where(tail, -z, torch.full_like(z, -_TAIL_Z))
    zl_tail = _tail_z_plus_lambda(t)
    lam_tail = t + zl_tail
    lam = torch.where(tail, lam_tail, lam_direct)
    zl = torch.where(tail, zl_tail, zl_direct)
    w = lam * zl
    dw = lam - w * (zl + lam)
    return logcdf, lam, w, dw


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
