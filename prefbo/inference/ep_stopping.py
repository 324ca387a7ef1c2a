r"""When EP's parallel sweeps stop, and what float32 sites can hold.

The stopping test of :func:`~prefbo.inference.ep.run_ep` is the sweep's
largest relative site change (:func:`site_change`). Stiff sites (contradicting
answers at a tiny probit scale pin a difference, ``τ̃`` near ``1/s²``) are
recomputed each sweep with a relative rounding far above the default ``1e-9``
(~1e-8 at ``s = 1e-10``, ~1e-6 at ``1e-11``): there a change that has stalled
is converged once it is within a margin of the sweep's own rounding floor
(:func:`rounding_floor`), measured by moving the sites by a few units in the
last place and sweeping again.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from prefbo.exceptions import NumericalError
from prefbo.inference.stiff import stiffness

# sweeps without halving the best change before the stopping test asks
# whether the change is at the sweep's rounding floor, and the margin over
# that floor a converged change may have
STALL = 5
FLOOR_MARGIN = 8.0


def site_change(d_tau: Tensor, d_nu: Tensor, tau: Tensor, nu: Tensor) -> Tensor:
    r"""The stopping test's measure: the largest ``|Δτ̃| / (1 + τ̃)`` and
    ``|Δν̃| / (1 + |ν̃|)`` per batch element."""
    return torch.maximum(
        (d_tau.abs() / (1.0 + tau.abs())).amax(-1),
        (d_nu.abs() / (1.0 + nu.abs())).amax(-1),
    )


def rounding_floor(
    sweep: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]],
    tau: Tensor,
    nu: Tensor,
    tau_new: Tensor,
    nu_new: Tensor,
) -> Tensor:
    r"""The change a sweep makes from rounding alone.

    The sites move by four units in the last place (alternating in sign
    along the sites) and are swept again: how far the image moves is the
    sweep's amplification of rounding in its input, which bounds the change
    it can attain (no ``torch`` random state is used).

    Args:
        sweep: The undamped site update, ``(τ̃, ν̃) -> (τ̃', ν̃')``.
        tau, nu: ``batch x m`` sites the last sweep started from.
        tau_new, nu_new: Their images under ``sweep``.

    Returns:
        ``batch``: the floor, measured as :func:`site_change`.
    """
    eps = torch.finfo(tau.dtype).eps
    sign = 1.0 - 2.0 * (torch.arange(tau.shape[-1], device=tau.device) % 2)
    bump = 1.0 + 4.0 * eps * sign.to(tau.dtype)
    tau_b, nu_b = sweep(tau * bump, nu * bump)
    return site_change(tau_b - tau_new, nu_b - nu_new, tau, nu)


class StoppingTest:
    r"""EP's stopping test, sweep by sweep.

    A batch element has converged when its change is at most ``tol``, or,
    with ``tol > 0``, when its change has not halved for :data:`STALL`
    sweeps and is within :data:`FLOOR_MARGIN` times the sweep's
    :func:`rounding_floor` (measured then only, and at most every
    :data:`STALL` sweeps, so a run that converges costs no extra sweep).

    Args:
        tol: The tolerance on :func:`site_change`.
        change: ``batch`` starting best changes (``inf``), for the shape.
    """

    def __init__(self, tol: float, change: Tensor) -> None:
        self.tol = tol
        self.best = change
        self.stall = torch.zeros_like(change, dtype=torch.long)

    def __call__(
        self,
        change: Tensor,
        sweep: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]],
        tau: Tensor,
        nu: Tensor,
        tau_new: Tensor,
        nu_new: Tensor,
    ) -> Tensor:
        r"""``batch`` bool: converged after this sweep (arguments as
        :func:`rounding_floor`'s, ``change`` the sweep's)."""
        zero = torch.zeros_like(self.stall)
        self.stall = torch.where(change < 0.5 * self.best, zero, self.stall + 1)
        self.best = torch.minimum(self.best, change)
        converged = change <= self.tol
        stalled = ~converged & (self.stall >= STALL) & (self.tol > 0)
        if bool(stalled.any()):
            floor = rounding_floor(sweep, tau, nu, tau_new, nu_new)
            converged = change <= torch.clamp_min(FLOOR_MARGIN * floor, self.tol)
            self.stall = torch.where(stalled, zero, self.stall)
        return converged


# the largest τ̃_k (K_ww + K_ll) a float32 run takes: its means move from
# float64's by about ε τ̃ (K_ww + K_ll) (1e-2 at 8.5e4, 3e-2 at 7e5, 6e-2 at
# 7e6 on 100 answers about 20 designs), and by up to 7e-3 below it, where
# float32's step tolerance (1e-4) rules
FLOAT32_MAX_STIFFNESS = 2.0**16


def check_holdable(
    tau: Tensor, comps: Tensor, prior_diag: Tensor, noise_std: float
) -> None:
    r"""Refuse float32 sites stiffer than :data:`FLOAT32_MAX_STIFFNESS`.

    Args:
        tau: ``batch x m`` site precisions.
        comps: ``batch x m x 2`` their comparisons.
        prior_diag: ``batch x n`` diagonal of the prior covariance.
        noise_std: The likelihood's ``noise_std``, for the message.

    Raises:
        NumericalError: A float32 ``τ̃_k (K_ww + K_ll)`` above the limit.
    """
    if tau.dtype != torch.float32:
        return
    worst = float(stiffness(tau, comps, prior_diag).amax())
    if worst > FLOAT32_MAX_STIFFNESS:
        raise NumericalError(
            f"EP in float32: answers at noise_std={noise_std:g} pin a utility "
            f"difference with a site precision {worst:.3g} times its prior "
            f"variance's inverse, beyond the {FLOAT32_MAX_STIFFNESS:.3g} float32 "
            "takes (its means would move from float64's by about 1.2e-7 times "
            "that); use float64 designs (X.double()), or PairwiseLaplaceGP."
        )
