r"""Statistics of the maximum ``f*`` used by the ENT-DPP quality.

- :func:`max_value_information_gain`: MES's single-point information gain
  about ``f*`` at a standardised gap ``γ``, stable for any finite ``γ``;
- :func:`gumbel_max_moments`: mean and sd of the maximum of independent
  normals, by a Gumbel fit to its quartiles (as BoTorch's MES).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from prefbo.utils.normal import probit_terms

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_EULER_GAMMA = 0.5772156649015329


def max_value_information_gain(gamma: Tensor) -> Tensor:
    r"""Max-value entropy gain ``γφ(γ)/(2Φ(γ)) - log Φ(γ)``, elementwise.

    This is MES's single-point information gain about the maximum ``f*``
    (Wang & Jegelka 2017) at standardised gap ``γ``; it is ``≥ 0``, tends to 0
    as ``γ → +∞`` and grows like ``log|γ| + ½ log 2π - ½`` as ``γ → -∞``. For
    ``γ < 0`` the identity ``-γ²/2 - log φ(γ) = ½ log 2π`` gives the
    cancellation-free form ``γ(γ + λ)/2 + log λ + ½ log 2π`` with
    ``λ = φ(γ)/Φ(γ)``, ``γ + λ`` taken from
    :func:`~prefbo.utils.normal.probit_terms` (accurate for any finite ``γ``).

    Args:
        gamma: A tensor of any shape.

    Returns:
        A tensor of ``gamma``'s shape and dtype.
    """
    log_cdf, lam, w, _ = probit_terms(gamma.to(torch.float64))
    g = gamma.to(torch.float64)
    neg = g < 0
    g_neg = torch.where(neg, g, -1.0)  # keep the unused branch finite
    lam_neg = torch.where(neg, lam, 1.0)
    w_neg = torch.where(neg, w, 1.0)
    right = 0.5 * g * lam - log_cdf
    left = 0.5 * g_neg * (w_neg / lam_neg) + lam_neg.log() + _HALF_LOG_2PI
    return torch.where(neg, left, right).to(gamma.dtype)


def gumbel_max_moments(
    mean: Tensor, sd: Tensor, num_bisections: int = 50
) -> tuple[Tensor, Tensor]:
    r"""Mean and sd of the maximum of independent normals, by a Gumbel fit.

    As BoTorch's MES (``_sample_max_value_Gumbel``, after Wang & Jegelka
    2017): the quartiles of ``P(f* ≤ y) ≈ Π_i Φ((y - μ_i)/σ_i)`` are found by
    bisection (batched, a fixed number of steps: no host synchronisation), a
    Gumbel ``(a, b)`` is fitted to them, and its moments
    ``a + b γ_E`` and ``b π / √6`` are returned. Correlations between the
    ``c`` points are ignored, which overestimates the maximum.

    Args:
        mean: A ``batch_shape x c`` tensor of marginal means.
        sd: A ``batch_shape x c`` tensor of marginal standard deviations.
        num_bisections: Bisection steps.

    Returns:
        ``(μ*, σ*)``, each of shape ``batch_shape``.
    """
    c = mean.shape[-1]
    sd = sd.clamp_min(torch.finfo(sd.dtype).eps * (1.0 + mean.abs().amax(-1, True)))
    k = math.sqrt(2.0 * math.log(10.0 * c)) + 1.0  # Φ(k)^c > 3/4
    lo = (mean - 3.0 * sd).amax(-1, keepdim=True).expand(mean.shape[:-1] + (3,))
    hi = (mean + k * sd).amax(-1, keepdim=True).expand(mean.shape[:-1] + (3,))
    log_p = torch.tensor([0.25, 0.5, 0.75], dtype=mean.dtype, device=mean.device).log()
    for _ in range(num_bisections):
        mid = 0.5 * (lo + hi)  # batch x 3
        z = (mid.unsqueeze(-1) - mean.unsqueeze(-2)) / sd.unsqueeze(-2)  # batch x 3 x c
        below = torch.special.log_ndtr(z).sum(-1) < log_p  # batch x 3
        lo, hi = torch.where(below, mid, lo), torch.where(below, hi, mid)
    q = 0.5 * (lo + hi)  # quartiles, batch x 3
    b = (q[..., 2] - q[..., 0]) / (math.log(math.log(4.0)) - math.log(math.log(4 / 3)))
    a = q[..., 1] + b * math.log(math.log(2.0))
    return a + b * _EULER_GAMMA, b * (math.pi / math.sqrt(6.0))
