r"""Each person's posterior by expectation propagation, a few dimensions at a
time.

The per-person model is that of :mod:`~prefbo.models.collaborative.people`:
a latent ``z ~ N(μ⁰, I)`` in ``D`` dimensions and answers ``w ≻ l`` with
probit likelihood ``Φ((c_a + Δ_aᵀz) / s)``. Expectation propagation (Minka
2001) replaces each answer by a Gaussian site in its direction,
``exp(-½ τ̃_a t² + ν̃_a t)`` in ``t = Δ_aᵀz``, so that

.. math::
    q(z) = N(μ, Λ^{-1}),\qquad Λ = I + Δᵀ \operatorname{diag}(τ̃) Δ,
    \qquad Λ μ = μ⁰ + Δᵀ ν̃,

and matches, site by site, the mean and variance of ``t_a`` under the
tilted distribution (cavity times the true likelihood). With a linear
predictor and a probit link these moments are closed-form (Rasmussen &
Williams 2006, §3.6). Unlike the Laplace approximation, whose mean is the
mode, EP's mean follows the posterior's mass: where a few answers are
nearly decisive (rankings, a few answers of a newcomer), the posterior is
skewed and its mean lies beyond the mode, which is what the next answer's
prediction needs.

Sites are first updated in parallel from one posterior, taking a damped
step (each person's halved whenever their largest change stops shrinking,
as in a cycle); people still moving after a few sweeps go on site by site
(sequential EP, a rank-one update of ``q`` per site), which converges
where strongly interacting sites make the parallel sweep slow. The run
starts from empty sites every time, so a person's posterior after answer
by answer updates is that of one refit, to the stopping tolerance (about
1e-9 in the mean: when a person stops depends on the others in their
batch).
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import Tensor

from prefbo.exceptions import NumericalWarning, UnsupportedError
from prefbo.likelihoods.pairwise import PairwiseLikelihood, PairwiseProbitLikelihood
from prefbo.models.collaborative.people import PersonPosterior
from prefbo.utils.normal import probit_terms

#: Stop when no site parameter moves by more than this (float64).
TOLERANCE = 1e-8
#: Parallel sweeps (all sites at once, cheap) before the people still moving
#: go on with sequential ones (site by site, robust where sites interact).
PARALLEL_SWEEPS = 30
#: Sequential sweeps at most, after which a warning says how far off it is.
MAX_SEQUENTIAL_SWEEPS = 200
#: The parallel step towards the matched sites at first.
FIRST_DAMPING = 1.0
#: A person whose largest change does not shrink below this times the last
#: (a cycle, or growth) has their parallel step halved ...
SHRINK = 0.99
#: ... down to this.
SMALLEST_DAMPING = 0.125
#: A site whose direction has variance below this (relative to the scale
#: ``s²``) carries no information about ``z`` and keeps an empty site.
NO_DIRECTION = 1e-14


def _moments(
    delta: Tensor, tau: Tensor, nu: Tensor, prior_mean: Tensor, eye: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""``q``'s ``B x D`` mean, ``B x D x D`` precision Cholesky factor, and
    the ``B x A`` means and variances of ``t_a = Δ_aᵀz`` under it."""
    precision = eye + delta.mT @ (tau.unsqueeze(-1) * delta)
    L = torch.linalg.cholesky(precision)
    eta = prior_mean + (delta.mT @ nu.unsqueeze(-1)).squeeze(-1)
    mu = torch.cholesky_solve(eta.unsqueeze(-1), L).squeeze(-1)
    m = (delta @ mu.unsqueeze(-1)).squeeze(-1)
    v = (torch.linalg.solve_triangular(L, delta.mT, upper=False) ** 2).sum(-2)
    return mu, L, m, v


def _matched(
    m: Tensor, v: Tensor, tau: Tensor, nu: Tensor, offset: Tensor, s2: float
) -> tuple[Tensor, Tensor]:
    r"""New site parameters ``(τ̃, ν̃)`` from ``q``'s marginals ``m, v`` of the
    sites' directions and their current parameters: the cavity (``q``
    without the site; ``1 - τ̃ v > 0`` in exact arithmetic, as ``q``'s
    precision holds the site's) times the probit, moment-matched, divided
    by the cavity. ``τ̃ = w / (s² + v₋(1 - w))`` has no cancellation."""
    keep = (1.0 - tau * v).clamp_min(1e-300)
    v_cav, m_cav = v / keep, (m - v * nu) / keep
    root = (s2 + v_cav).sqrt()
    _, lam, w, _ = probit_terms((offset + m_cav) / root)
    w = w.clamp(0.0, 1.0)  # in (0, 1); far in the tail it rounds past 1
    tau_new = w / (s2 + v_cav * (1.0 - w))
    return tau_new, tau_new * (m_cav + v_cav * lam / root) + lam / root


def _sequential(
    delta: Tensor,
    offset: Tensor,
    live: Tensor,
    tau: Tensor,
    nu: Tensor,
    prior_mean: Tensor,
    eye: Tensor,
    s2: float,
) -> tuple[Tensor, Tensor, Tensor]:
    r"""Sequential sweeps from the given sites until no site moves by
    :data:`TOLERANCE`; each site's update is a rank-one change of ``q``'s
    covariance. Returns the new ``B x A`` sites ``(τ̃, ν̃)`` and each
    person's last largest change."""
    tau, nu = tau.clone(), nu.clone()
    mu, L, _, _ = _moments(delta, tau, nu, prior_mean, eye)
    cov = torch.cholesky_inverse(L)
    change = torch.full_like(offset[:, 0], math.inf)
    for _ in range(MAX_SEQUENTIAL_SWEEPS):
        change = torch.zeros_like(change)
        for a in range(delta.shape[1]):
            x = delta[:, a]  # B x D
            Sx = (cov @ x.unsqueeze(-1)).squeeze(-1)
            v, m = (x * Sx).sum(-1), (x * mu).sum(-1)
            t_new, n_new = _matched(m, v, tau[:, a], nu[:, a], offset[:, a], s2)
            d_tau = torch.where(live[:, a], t_new - tau[:, a], torch.zeros_like(v))
            d_nu = torch.where(live[:, a], n_new - nu[:, a], torch.zeros_like(v))
            change = torch.maximum(change, torch.maximum(d_tau.abs(), d_nu.abs()))
            denom = 1.0 + d_tau * v  # Sherman-Morrison
            cov = cov - (d_tau / denom)[:, None, None] * Sx[:, :, None] * Sx[:, None]
            mu = mu + Sx * ((d_nu - d_tau * m) / denom).unsqueeze(-1)
            tau[:, a] += d_tau
            nu[:, a] += d_nu
        if float(change.max()) < TOLERANCE:
            break
    return tau, nu, change


def check_ep_likelihood(likelihood: object) -> None:
    r"""Raise :class:`~prefbo.exceptions.UnsupportedError` unless
    ``likelihood`` is the probit (EP's tilted moments are closed-form for the
    probit only)."""
    if not isinstance(likelihood, PairwiseProbitLikelihood):
        raise UnsupportedError(
            "people_inference='ep' needs the probit likelihood (its tilted "
            f"moments are closed-form); got {type(likelihood).__name__}. Use "
            "people_inference='laplace' with this likelihood."
        )


def ep_people(
    likelihood: PairwiseLikelihood,
    delta: Tensor,
    offset: Tensor,
    mask: Tensor,
    prior_mean: Tensor,
) -> PersonPosterior:
    r"""EP posteriors of ``B`` people's latents (see the module docstring).

    Args:
        likelihood: A prefbo :class:`~prefbo.likelihoods.PairwiseProbitLikelihood`.
        delta: ``B x A x D`` rows ``Δ`` of each person's answers (``A`` the
            most answers of any of them; padding rows are ignored).
        offset: ``B x A`` shared-utility differences ``c``.
        mask: ``B x A`` bool, True for real answers.
        prior_mean: ``B x D`` prior means ``μ⁰`` (prior covariance ``I``).

    Returns:
        The :class:`~prefbo.models.collaborative.people.PersonPosterior` of
        ``q``: its mean and the Cholesky factor of its precision.

    Raises:
        UnsupportedError: For a likelihood other than the probit (the
            tilted moments are closed-form for the probit only).
    """
    check_ep_likelihood(likelihood)
    # in float64 whatever the model's dtype, as the Laplace posteriors
    dtype = delta.dtype
    delta, offset, prior_mean = (
        t.detach().double() for t in (delta, offset, prior_mean)
    )
    B, A, D = delta.shape
    eye = torch.eye(D, dtype=delta.dtype, device=delta.device)
    if B == 0 or A == 0 or D == 0:
        return PersonPosterior(prior_mean.to(dtype), eye.expand(B, D, D).to(dtype))
    s2 = float(likelihood.scale) ** 2
    live = mask.to(delta.device) & ((delta**2).sum(-1) > NO_DIRECTION * s2)
    tau = torch.zeros_like(offset)
    nu = torch.zeros_like(offset)
    damping = torch.full((B, 1), FIRST_DAMPING, dtype=delta.dtype, device=delta.device)
    last = torch.full((B,), math.inf, dtype=delta.dtype, device=delta.device)
    change = last
    for _ in range(PARALLEL_SWEEPS):
        _, _, m, v = _moments(delta, tau, nu, prior_mean, eye)
        tau_new, nu_new = _matched(m, v, tau, nu, offset, s2)
        tau_new = torch.where(live, tau_new, torch.zeros_like(tau_new))
        nu_new = torch.where(live, nu_new, torch.zeros_like(nu_new))
        change = torch.maximum((tau_new - tau).abs(), (nu_new - nu).abs()).amax(-1)
        if float(change.max()) < TOLERANCE:
            break
        stuck = (change > SHRINK * last) & (damping[:, 0] > SMALLEST_DAMPING)
        damping = torch.where(stuck.unsqueeze(-1), damping / 2, damping)
        last = change
        tau = tau + damping * (tau_new - tau)
        nu = nu + damping * (nu_new - nu)
    else:  # the people still moving go on site by site
        moving = (change >= TOLERANCE).nonzero().squeeze(-1)
        tau[moving], nu[moving], left = _sequential(
            delta[moving],
            offset[moving],
            live[moving],
            tau[moving],
            nu[moving],
            prior_mean[moving],
            eye,
            s2,
        )
        if float(left.max()) >= TOLERANCE:
            warnings.warn(
                "the people's EP posteriors did not converge in "
                f"{PARALLEL_SWEEPS} parallel and {MAX_SEQUENTIAL_SWEEPS} "
                f"sequential sweeps (largest site change left "
                f"{float(left.max()):.3g}).",
                NumericalWarning,
                stacklevel=2,
            )
    mu, L, _, _ = _moments(delta, tau, nu, prior_mean, eye)
    return PersonPosterior(mu.to(dtype), L.to(dtype))
