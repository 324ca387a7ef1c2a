r"""Anderson acceleration and adaptive damping of EP's parallel site updates.

Type-II Anderson mixing (Walker & Ni 2011) of the damped parallel-EP map,
safeguarded so that every iterate is a proper EP state and no extrapolation
reaches far beyond the plain sweep; and the damping step that map takes
(:func:`adapt_step`).
"""

from __future__ import annotations

import torch
from torch import Tensor

# sweeps before the acceleration starts: a warm start (a fit's next
# evaluation) converges in a few plain sweeps, which the acceleration's own
# ~20 small ops per sweep would only slow down
ANDERSON_FROM = 4


# the largest Anderson correction taken, in undamped sweeps' changes: a linear
# map contracting by ρ per sweep needs ρ / (1 - ρ) of them (3 at ρ = 0.75, 9
# at ρ = 0.9)
ANDERSON_REACH = 20.0


class Anderson:
    r"""Anderson acceleration (type II) of the damped parallel-EP map.

    Parallel EP converges linearly, and slowly where answers share designs
    (a contraction of ~0.75 per sweep on the PBO loop's data: 70 sweeps from
    zero sites to ``1e-9``). From sweep ``ANDERSON_FROM`` on, with the last
    ``memory`` sweeps' sites ``x_j`` and their images ``g_j = x_j + step·Δ_j``,
    the next sites are ``g - ΔG γ``, ``γ`` the least-squares fit of the latest
    residual by the residual differences ``ΔF`` (scaled like the stopping
    test). EP's site precisions are non-negative by construction, so a proposal
    with a negative one or a non-finite value is not taken (the
    plain damped step is, and the history restarts), so every iterate is a
    proper EP state; nor is one whose correction exceeds
    ``ANDERSON_REACH`` undamped sweeps' changes: where contradicting answers
    at a tiny probit scale pin a difference, the site precisions grow by a
    factor per sweep on their way to ``1/s²``, a map far from linear, whose
    extrapolation threw the sites off into hundreds of sweeps. The stopping
    test is the plain sweep's change as before, so the fixed point and its
    tolerance are unchanged.
    """

    def __init__(self, memory: int) -> None:
        self.memory = memory
        self.last: tuple[Tensor, Tensor] | None = None  # (f, g) of the last sweep
        self.dF: list[Tensor] = []  # differences of consecutive (f, g)
        self.dG: list[Tensor] = []

    def extrapolate(
        self,
        tau: Tensor,
        nu: Tensor,
        d_tau: Tensor,
        d_nu: Tensor,
        step: Tensor,
        converged: Tensor,
    ) -> tuple[Tensor, Tensor]:
        r"""The next sites after a damped sweep.

        Args:
            tau, nu: ``batch x m`` sites after the damped step (``g``).
            d_tau, d_nu: ``batch x m`` the undamped sweep's changes.
            step: ``batch`` damping of that step.
            converged: ``batch`` elements whose sweep met the tolerance
                (they keep the damped step).

        Returns:
            ``(τ̃, ν̃)``: the extrapolated sites where a proposal is taken,
            ``(tau, nu)`` elsewhere.
        """
        m = tau.shape[-1]
        g = torch.cat([tau, nu], -1)  # the damped step's sites, batch x 2m
        d = torch.cat([d_tau, d_nu], -1) * step.unsqueeze(-1)
        f = d / (1.0 + (g - d).abs())
        last, self.last = self.last, (f, g)
        if last is None:
            return tau, nu
        self.dF.append(f - last[0])
        self.dG.append(g - last[1])
        if len(self.dF) > self.memory:
            del self.dF[0], self.dG[0]
        dF, dG = torch.stack(self.dF, -1), torch.stack(self.dG, -1)  # b x 2m x k
        dFt = dF.transpose(-1, -2)
        A = dFt @ dF  # batch x k x k
        ridge = 1e-10 * A.diagonal(dim1=-2, dim2=-1).sum(-1, keepdim=True) + 1e-300
        A.diagonal(dim1=-2, dim2=-1).add_(ridge)
        C, info = torch.linalg.cholesky_ex(A)
        gamma = torch.cholesky_solve(dFt @ f.unsqueeze(-1), C)
        x = g - (dG @ gamma).squeeze(-1)
        # a trust region: a correction far beyond the plain step (scaled as
        # the stopping test) extrapolates a map that is not near-linear there
        # (sites growing geometrically where contradicting answers at a tiny
        # probit scale pin a difference), and can throw the sites off it
        sweep = (f / step.unsqueeze(-1)).abs().amax(-1, keepdim=True)  # undamped
        far = (x - g).abs() / (1.0 + g.abs()) > ANDERSON_REACH * sweep
        ok = (
            (info == 0)
            & ~converged
            & (x[..., :m].amin(-1) >= 0)
            & x.isfinite().all(-1)
            & ~far.any(-1)
        )
        if not bool(ok.all()):  # restart the history from this sweep
            self.dF, self.dG = [], []
        x = torch.where(ok.unsqueeze(-1), x, g)
        return x[..., :m], x[..., m:]


def adapt_step(step, change, last_change, d_tau, d_nu, last_d, streak):
    r"""The next damping step per batch element, and the monotone streaks.

    Parallel EP oscillates where its step is too long: the step halves
    (down to ``1/64``) when the largest site change grows from one sweep to
    the next. A change that grows while every site keeps moving the same
    way as in the last two sweeps is no oscillation but a monotone run:
    where contradicting answers at a tiny probit scale pin a difference, the
    site precisions grow by a factor per sweep on their way to ``1/s²``.
    There the step doubles (up to 1) instead; halving it let a 3-cycle at
    ``s = 1e-11`` end 200 sweeps far from its fixed point, and never letting
    it recover left a pair and its reversal wandering about theirs.

    Returns:
        ``(step, streak)``: the new steps and the counts of consecutive
        sweeps in which no site reversed its move.
    """
    if last_d is None:
        same = torch.zeros_like(change, dtype=torch.bool)
    else:
        reversed_ = ((d_tau * last_d[0]) < 0).any(-1) | ((d_nu * last_d[1]) < 0).any(-1)
        same = ~reversed_
    streak = torch.where(same, streak + 1, torch.zeros_like(streak))
    monotone = streak >= 2
    step = torch.where(
        (change > last_change) & ~monotone, (step * 0.5).clamp_min(1 / 64), step
    )
    return torch.where(monotone, (step * 2.0).clamp_max(1.0), step), streak
