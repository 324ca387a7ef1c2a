r"""Each person's posterior in a collaborative preference model, a few
dimensions at a time.

Person ``p``'s utility is

.. math::
    f_p(x) = F_0(x) + \sum_k w_{pk} F_k(x) + r_p(x),
    \qquad r_p(x) = s_r\, a_r(x)^\top \rho_p,

with the shared functions ``F_j`` of
:mod:`~prefbo.models.collaborative.shared`, the person's weights ``w_p`` on
the ``K`` tastes and the whitened values ``ρ_p`` of their own residual on
``M_r`` inducing points. With the shared functions at their posterior means
the person's latent ``z_p = [w_p; ρ_p]`` (``D = K + M_r`` coordinates) enters
linearly: an answer ``w ≻ l`` has likelihood ``F((c + Δᵀz_p) / s)``, with
``c = F̄_0(w) − F̄_0(l)`` and ``Δ`` the difference of the rows
``[F̄_1..F̄_K, s_r a_r]`` at the two designs. Under the prior
``z_p ~ N(μ_p⁰, I)`` (``μ_p⁰ = [B u_p; 0]`` with person features ``u_p``)
the log-posterior is concave (probit and logit links), and its Laplace
approximation ``N(ẑ_p, H⁻¹)``, ``H = I + Σ_a λ_a Δ_a Δ_aᵀ`` at the mode
(Chu & Ghahramani 2005, in weight space), is found by Newton's method in
``D`` dimensions: batched over people, milliseconds per person. The mode is
unique, so updating a person after each answer (warm-started at the previous
mode) gives exactly the posterior of a refit on all their answers.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import torch
from torch import Tensor

from prefbo.exceptions import NumericalWarning
from prefbo.likelihoods.pairwise import PairwiseLikelihood

#: Newton's stopping rule: the largest step in any coordinate (whitened
#: units: prior standard deviations), in float64.
TOLERANCE = 1e-10
MAX_ITERATIONS = 100
#: Where no step gains beyond rounding, the largest Newton step left below
#: which the run counts as converged (above it the link has saturated).
STALL_STEP = 1e-6
#: Step halvings tried per Newton step before a person's step is dropped.
HALVINGS = 30


class PersonPosterior(NamedTuple):
    r"""Gaussian posteriors ``N(mean, (L Lᵀ)⁻¹)`` of ``B`` people's latents
    (Laplace's, or EP's from :mod:`~prefbo.models.collaborative.ep`).

    Attributes:
        mean: ``B x D`` means (Laplace: the modes).
        precision_chol: ``B x D x D`` lower Cholesky factors ``L`` of the
            precisions (Laplace: ``H`` at the modes).
    """

    mean: Tensor
    precision_chol: Tensor

    def covariance(self) -> Tensor:
        r"""The ``B x D x D`` covariances ``H⁻¹``."""
        return torch.cholesky_inverse(self.precision_chol)

    def second_moments(self, k: int) -> Tensor:
        r"""``B x k`` second moments ``E[z_i²] = Σ_ii + ẑ_i²`` of the first
        ``k`` coordinates (the taste weights)."""
        var = self.covariance().diagonal(dim1=-2, dim2=-1)[:, :k]
        return var + self.mean[:, :k] ** 2

    def whitened(self, rows: Tensor) -> Tensor:
        r"""``L⁻¹ rowsᵀ`` for ``B x n x D`` rows: ``B x D x n``, whose squared
        column norms are the variances of ``rows @ z``."""
        return torch.linalg.solve_triangular(self.precision_chol, rows.mT, upper=False)


def _log_terms(
    likelihood: PairwiseLikelihood, t: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    r"""``log F(t/s)``, its first derivative and negative second derivative in
    ``t`` for a ``B x A`` tensor of differences."""
    A = t.shape[-1]
    utility = torch.cat([t, torch.zeros_like(t)], dim=-1)  # B x 2A
    idx = torch.arange(A, device=t.device)
    pairs = torch.stack([idx, idx + A], dim=-1)  # A x 2
    logp, d1, w, _ = likelihood.derivatives(utility, pairs)
    return logp, d1, w


def _evaluate(
    likelihood: PairwiseLikelihood,
    z: Tensor,
    delta: Tensor,
    offset: Tensor,
    weight: Tensor,
    prior_mean: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    r"""At ``B x D`` latents: the ``B`` log-posteriors ``Ψ`` and the ``B x A``
    first and negative second derivatives of the answers' log-likelihoods
    (zero for padding), from one evaluation of the link."""
    t = offset + (delta @ z.unsqueeze(-1)).squeeze(-1)  # B x A
    logp, d1, w = _log_terms(likelihood, t)
    psi = (logp * weight).sum(-1) - 0.5 * ((z - prior_mean) ** 2).sum(-1)
    return psi, d1 * weight, w * weight


def laplace_people(
    likelihood: PairwiseLikelihood,
    delta: Tensor,
    offset: Tensor,
    mask: Tensor,
    prior_mean: Tensor,
    start: Tensor | None = None,
) -> PersonPosterior:
    r"""Laplace posteriors of ``B`` people's latents (see the module docstring).

    Args:
        likelihood: A prefbo pairwise likelihood (probit or logit).
        delta: ``B x A x D`` rows ``Δ`` of each person's answers (``A`` the
            most answers of any of them; padding rows are ignored).
        offset: ``B x A`` shared-utility differences ``c``.
        mask: ``B x A`` bool, True for real answers.
        prior_mean: ``B x D`` prior means ``μ⁰`` (prior covariance ``I``).
        start: ``B x D`` starting points (default the prior means).

    Returns:
        The :class:`PersonPosterior` at the modes.
    """
    # in float64 whatever the model's dtype: D is small, and float32's
    # rounding would stop Newton short of the mode
    dtype = delta.dtype
    delta, offset, prior_mean = (
        t.detach().double() for t in (delta, offset, prior_mean)
    )
    start = None if start is None else start.detach().double()
    B, A, D = delta.shape
    mask = mask.to(delta.device)
    weight = mask.to(delta.dtype)
    z = (prior_mean if start is None else start).clone()
    eye = torch.eye(D, dtype=delta.dtype, device=delta.device)
    if B == 0 or A == 0 or D == 0:
        return PersonPosterior(prior_mean.to(dtype), eye.expand(B, D, D).to(dtype))

    def evaluate(z: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return _evaluate(likelihood, z, delta, offset, weight, prior_mean)

    psi, d1, w = evaluate(z)
    converged, largest = False, float("inf")
    for _ in range(MAX_ITERATIONS):
        grad = (delta.mT @ d1.unsqueeze(-1)).squeeze(-1) - (z - prior_mean)
        H = eye + delta.mT @ (w.unsqueeze(-1) * delta)
        step = torch.cholesky_solve(
            grad.unsqueeze(-1), torch.linalg.cholesky(H)
        ).squeeze(-1)
        largest = float(step.abs().max())
        if largest < TOLERANCE:
            converged = True
            break
        # Newton's step on a concave function; halve it where it overshoots
        # (Ψ falls by more than rounding)
        slack = 1e-12 * (1.0 + psi.abs())
        alpha = torch.ones_like(psi)
        trial = z + step
        value, d1_t, w_t = evaluate(trial)
        for _ in range(HALVINGS):
            short = value < psi - slack
            if not bool(short.any()):
                break
            alpha = torch.where(short, alpha / 2, alpha)
            trial = torch.where(
                short.unsqueeze(-1), z + alpha.unsqueeze(-1) * step, trial
            )
            again = evaluate(trial)
            value, d1_t, w_t = (
                torch.where(short.view(-1, *[1] * (new.ndim - 1)), new, old)
                for new, old in zip(again, (value, d1_t, w_t), strict=True)
            )
        keep = value >= psi - slack
        if not bool(keep.any()):  # no step gains beyond rounding: the mode
            converged = largest < STALL_STEP
            break
        z = torch.where(keep.unsqueeze(-1), trial, z)
        psi, d1, w = (
            torch.where(keep.view(-1, *[1] * (new.ndim - 1)), new, old)
            for new, old in zip((value, d1_t, w_t), (psi, d1, w), strict=True)
        )
    if not converged:
        warnings.warn(
            f"the people's Laplace posteriors did not converge in {MAX_ITERATIONS} "
            f"Newton steps (largest step left {largest:.3g}); "
            "differences this large saturate the link (use the probit "
            "likelihood, or rescale the designs' utilities).",
            NumericalWarning,
            stacklevel=2,
        )
    H = eye + delta.mT @ (w.unsqueeze(-1) * delta)  # at the mode
    return PersonPosterior(z.to(dtype), torch.linalg.cholesky(H).to(dtype))
