r"""Expectation propagation for pairwise probit answers (Minka 2001).

Each answer ``k`` is a site ``Φ(a_kᵀf / s)`` approximated by an unnormalised
Gaussian in the direction ``a_k = e_w - e_l``:
``t̃_k(Δ) = Z̃_k exp(-½ τ̃_k Δ² + ν̃_k Δ)``. The approximate posterior is then

    q(f) = N(μ, Σ),   Σ = (K⁻¹ + Dᵀ diag(τ̃) D)⁻¹,   μ = Σ Dᵀ ν̃,

the same structure as the Laplace approximation with curvature ``τ̃``, so the
prediction machinery of :class:`~prefbo.inference.GaussianApproximation` is shared.

Sites are updated in parallel ("parallel EP"): all cavities are read from the
current ``q``, all tilted moments are matched, and the natural parameters move
a damped step towards the new sites. For the probit the new site precision
``τ̃ = w / (s² + v₋(1 - w))`` (``w = λ(z)(z + λ(z))`` at the cavity) is
non-negative by construction and computed without cancellation. Iteration
stops when no site parameter moves by more than ``tol`` (relative), or by no
more than the sweep's own rounding once the change has stalled
(:mod:`prefbo.inference.ep_stopping`).

The EP evidence ``log Z_EP`` is stationary in the site parameters at
convergence, so its gradient in ``K`` is the explicit one,
``½ (ααᵀ - R)`` with ``α = K⁻¹μ`` (Rasmussen & Williams 2006, §3.6 and §5.5.2).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from prefbo.exceptions import (
    ConvergenceWarning,
    NumericalError,
    UnsupportedError,
)
from prefbo.inference.anderson import ANDERSON_FROM, Anderson, adapt_step
from prefbo.inference.cholesky import jittered_cholesky, row_major
from prefbo.inference.ep_stopping import StoppingTest, check_holdable, site_change
from prefbo.inference.evidence import evidence_kernel_gradient
from prefbo.inference.gaussian import GaussianApproximation
from prefbo.inference.laplace import auto_form, check_form_and_device, default_tol
from prefbo.inference.laplacian import (
    cholesky_plus_laplacian,
    laplacian_index,
    laplacian_matmul,
    pair_diff,
    pair_quadratic,
    scatter_pairs,
)
from prefbo.inference.stiff import is_stiff, stiff_projector, stiff_solve
from prefbo.likelihoods.pairwise import PairwiseLikelihood, PairwiseProbitLikelihood
from prefbo.utils.checks import check_float, check_int, check_nonneg_float
from prefbo.utils.threads import limited


@dataclass(eq=False)
class EPState(GaussianApproximation):
    r"""EP approximation: a :class:`GaussianApproximation` whose ``mode`` is the EP mean
    ``μ`` and whose ``curvature`` holds the site precisions ``τ̃``.

    Attributes:
        site_nu: ``batch_shape x m`` site shifts ``ν̃``.
        invalid_cavities: ``batch_shape`` count of sites whose cavity was not a
            proper Gaussian at the last sweep (kept at their old values).
    """

    site_nu: Tensor | None = None
    invalid_cavities: Tensor | None = None

    def sites(self) -> EPSites:
        r"""The site parameters alone, to warm-start another EP run."""
        return EPSites(self.curvature, self.site_nu, self.comparisons)


@dataclass(frozen=True, eq=False)
class EPSites:
    r"""EP site parameters without the moments: a light warm start.

    Attributes:
        tau: ``batch_shape x m`` site precisions ``τ̃``.
        nu: ``batch_shape x m`` site shifts ``ν̃``.
        comparisons: ``batch_shape x m x 2`` the comparisons they belong to.
    """

    tau: Tensor
    nu: Tensor
    comparisons: Tensor


def _initial_sites(init, comps: Tensor, dtype, device) -> tuple[Tensor, Tensor]:
    r"""``(τ̃, ν̃)`` to start from: ``init``'s sites on the rows they belong to.

    ``init`` (an :class:`EPState` or :class:`EPSites`) is used when its
    comparisons, broadcast to ``comps``'s batch, are the first ``m₀ ≤ m`` rows
    of ``comps`` (the same answers, or answers appended since; the new rows
    start at zero) and ignored otherwise (a cold start at zero: the fixed
    point is the same).
    """
    tau = torch.zeros(comps.shape[:-1], dtype=dtype, device=device)
    nu = torch.zeros_like(tau)
    if isinstance(init, EPState):
        if init.site_nu is None:
            return tau, nu
        init = init.sites()
    if not isinstance(init, EPSites):
        return tau, nu
    m0 = init.tau.shape[-1]
    if m0 > comps.shape[-2] or init.comparisons.device != comps.device:
        return tau, nu
    try:  # sites of an unbatched model also start a batch (e.g. of fantasies)
        t0 = init.tau.expand(tau.shape[:-1] + (m0,))
        n0 = init.nu.expand(tau.shape[:-1] + (m0,))
        old = init.comparisons.expand(comps.shape[:-2] + (m0, 2))
    except RuntimeError:
        return tau, nu
    if not torch.equal(old, comps[..., :m0, :]):
        return tau, nu
    tau[..., :m0] = t0.to(tau)
    nu[..., :m0] = n0.to(nu)
    return tau, nu


# the cap on 1 + τ̃_k |h_k|² of the projector form: EP's sites at a probit
# scale s reach τ̃ ~ 1/s², and a cavity is the precision the other sites
# give, so capping them at Laplace's 1/ε (s ≈ 1e-8) would move the cavities;
# below ε^(-3/2) (s ≈ 1e-12) the rounding in the projector stays at ε^¼
_EP_MAX_CONDITION = {torch.float64: 2.0**78, torch.float32: 2.0**34}


@dataclass(eq=False)
class _Moments:
    r"""``q = N(μ, Σ)`` for given sites and what the sweep reads from it.

    Attributes:
        mu, S: ``μ`` and ``Σ`` (``None`` for a stiff ``τ̃``: the sweep reads
            the factors instead, and the state derives ``Σ = L (I - P) Lᵀ``
            from ``P`` when asked).
        info: Cholesky status (``0``: factorised).
        logdet: ``log|I + Lᵀ W L|`` or ``None`` (only the evidence needs it).
        b: ``Dᵀ ν̃``.
        alpha: ``K⁻¹ μ``.
        C: The formed system's factor, ``None`` for a stiff ``τ̃``.
        projector, factors: :func:`~prefbo.inference.stiff.stiff_projector`'s
            ``P`` and factors for a stiff ``τ̃`` (else ``None``); the factors
            carry every ``Δ_k``'s variance and cavity precision.
    """

    mu: Tensor
    S: Tensor | None
    info: Tensor
    logdet: Tensor | None
    b: Tensor
    alpha: Tensor
    C: Tensor | None = None
    projector: Tensor | None = None
    factors: tuple | None = None


def _gaussian(L, Kinv, tau, nu, comps, index, precision, prior_diag, with_logdet=True):
    r"""The :class:`_Moments` of sites ``(τ̃, ν̃)``; ``index``: the
    comparisons' :func:`laplacian_index`, ``prior_diag`` the diagonal of ``K``.

    A stiff ``τ̃`` (:func:`~prefbo.inference.stiff.is_stiff`: an answer at a
    tiny probit scale contradicted by others) takes the projector form of
    :mod:`prefbo.inference.stiff`, in which the prior's ``I`` is not lost:
    ``μ = Σ Dᵀν̃ = L A⁻¹ Hᵀ ν̃`` by :func:`stiff_solve` (``ν̃`` of the size
    of ``τ̃``) and ``α = L⁻ᵀ A⁻¹ Hᵀ ν̃``; ``Σ`` is not formed."""
    n = L.shape[-1]
    b = scatter_pairs(nu, comps, n)  # Dᵀ ν̃
    if is_stiff(tau, comps, prior_diag):
        max_condition = _EP_MAX_CONDITION.get(L.dtype, _EP_MAX_CONDITION[torch.float32])
        P, logdet, factors = stiff_projector(L, tau, comps, max_condition)
        p = stiff_solve(P, factors, nu, torch.zeros_like(b))  # A⁻¹ Hᵀ ν̃
        mu = (L @ p.unsqueeze(-1)).squeeze(-1)
        alpha = torch.linalg.solve_triangular(L.mT, p.unsqueeze(-1), upper=True)
        info = torch.zeros(b.shape[:-1], dtype=torch.int32, device=b.device)
        return _Moments(mu, None, info, logdet, b, alpha.squeeze(-1), None, P, factors)
    if precision:
        C, info = cholesky_plus_laplacian(Kinv, tau, index)
        S = row_major(torch.cholesky_inverse(C))
    else:
        A = L.transpose(-1, -2) @ laplacian_matmul(tau, comps, L)
        A.diagonal(dim1=-2, dim2=-1).add_(1.0)
        C, info = torch.linalg.cholesky_ex(A)
        F = torch.linalg.solve_triangular(C, L.transpose(-1, -2), upper=False)
        S = F.transpose(-1, -2) @ F
    logdet = None
    if with_logdet:  # |K⁻¹ + W| |K| in precision form, |I + Lᵀ W L| whitened
        logdet = 2 * C.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        if precision:
            logdet = logdet + 2 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    mu = (S @ b.unsqueeze(-1)).squeeze(-1)
    # α = K⁻¹ μ = Dᵀν̃ - W μ, since (K⁻¹ + W) μ = Dᵀ ν̃
    alpha = b - scatter_pairs(tau * pair_diff(mu, comps), comps, n)
    return _Moments(mu, S, info, logdet, b, alpha, C)


def _cavities(q: _Moments, tau, nu, comps, index):
    r"""Cavity precisions and shifts on every ``Δ_k``, and their validity.

    The cavity precision is ``1/(d_kᵀ Σ d_k) - τ̃_k``; for a stiff ``τ̃``
    both terms are of the size of ``τ̃``, and the projector's factors give
    it (and ``d_kᵀ Σ d_k``) without that subtraction."""
    m_k = pair_diff(q.mu, comps)
    tiny = torch.finfo(q.mu.dtype).tiny
    if q.factors is None:
        v_k = pair_quadratic(q.S, comps, index).clamp_min(tiny)
        tau_c = 1.0 / v_k - tau
    else:
        v_k, tau_c = q.factors[3].clamp_min(tiny), q.factors[4]
    nu_c = m_k / v_k - nu
    # a site with no direction (a padding row [i, i]) carries no information
    valid = (tau_c > 0) & (comps[..., 0] != comps[..., 1])
    return torch.where(valid, tau_c, 1.0), nu_c, valid


def check_ep_options(
    max_iter: object = 200,
    tol: object = None,
    damping: object = None,
    anderson_memory: object = 5,
) -> None:
    r"""Validate the options of :func:`run_ep` (see there).

    Args:
        max_iter: Sweep budget, an integer ``≥ 1``.
        tol: ``None`` or a finite tolerance ``≥ 0``.
        damping: ``None`` or a step in ``(0, 1]``.
        anderson_memory: An integer ``≥ 0``.

    Raises:
        InputTypeError: An option of the wrong type (the message names it).
        InputDataError: An option out of range (the message names it).
    """
    check_int("max_iter", max_iter, 1)
    check_nonneg_float("tol", tol, allow_none=True)
    check_float(
        "damping", damping, minimum=0, maximum=1, open_minimum=True, allow_none=True
    )
    check_int("anderson_memory", anderson_memory, 0)


def run_ep(
    chol_prior: Tensor,
    comparisons: Tensor,
    likelihood: PairwiseLikelihood,
    init: EPState | None = None,
    *,
    max_iter: int = 200,
    tol: float | None = None,
    damping: float | None = None,
    form: str = "auto",
    anderson_memory: int = 5,
) -> EPState:
    r"""Parallel EP for a batch of pairwise probit problems.

    Args:
        chol_prior: ``batch_shape x n x n`` lower factor of the prior
            covariance ``K``.
        comparisons: ``batch_shape x m x 2`` long ``[winner, loser]`` rows.
        likelihood: A :class:`~prefbo.likelihoods.PairwiseProbitLikelihood`.
            The sweeps read each site's tilted moments from its ``_terms``
            at the cavity's standardised mean ``m / √(s² + v)`` and the
            evidence reads ``_log_prob`` there: for ``p = F(Δ/s)`` with
            ``F = a + bΦ`` (the probit; a lapse rate ``ε/2 + (1 - ε)Φ``)
            the tilted normaliser is ``Z = F(m / √(s² + v))``, so such a
            subclass is run with its own moments. (For any other ``F``
            ``Z`` is not ``F`` at that point and the moments would be
            wrong.)
        init: Optional previous :class:`EPState` or :class:`EPSites` whose
            sites start the sweep: of the same comparisons, or of their first
            ``m₀`` rows (answers appended since start at zero); ignored when
            its comparisons are not such a prefix.
        max_iter: Sweep budget (an integer ``≥ 1``).
        tol: Stop when every site's ``|Δτ̃| / (1 + τ̃)`` and
            ``|Δν̃| / (1 + |ν̃|)`` fall below it (finite, ``≥ 0``); default
            ``1e-9`` (float64), ``1e-4`` (float32). A positive ``tol`` also
            stops a stalled change at the sweep's rounding floor
            (:class:`~prefbo.inference.ep_stopping.StoppingTest`); ``tol=0``
            runs to ``max_iter``.
        damping: Step towards the new sites, in ``(0, 1]``. Default: adaptive,
            per batch element, starting at 1, halving (down to 1/64)
            whenever the largest site change grows from one sweep to the
            next, and doubling (up to 1) while every site keeps its
            direction for three sweeps
            (:func:`~prefbo.inference.anderson.adapt_step`).
        form: ``"whitened"`` (``I + Lᵀ W L``, stable for any ``K``),
            ``"precision"`` (``K⁻¹ + W``, cheaper) or ``"auto"`` (precision in
            float64 when the diagonal of ``L`` spans at most 6 decades).
            Whatever the form, a sweep whose site precisions are stiff
            (contradicting answers at a tiny probit scale, where ``τ̃``
            reaches ``1/s²``) takes the projector form of
            :mod:`prefbo.inference.stiff`, whose variances stay between 0
            and the prior's.
        anderson_memory: Sweeps remembered by the Anderson acceleration of
            the site updates (see
            :class:`~prefbo.inference.anderson.Anderson`; 0: plain damped
            sweeps). Default 5.

    Returns:
        The :class:`EPState` (detached from autograd), with the EP evidence.

    Raises:
        UnsupportedError: ``likelihood`` is not a probit likelihood.
        InputTypeError: ``max_iter``, ``tol``, ``damping`` or
            ``anderson_memory`` is of the wrong type.
        InputDataError: ``form``, ``max_iter``, ``tol``, ``damping`` or
            ``anderson_memory`` is out of range, or ``comparisons`` is not on
            ``chol_prior``'s device.
        NumericalError: In float32, answers at a small noise need site
            precisions beyond ``2**16`` times the prior variance's inverse,
            where float32's means drift from float64's by ``ε`` times that
            (use float64).
    """
    if not isinstance(likelihood, PairwiseProbitLikelihood):
        raise UnsupportedError(
            "EP is implemented for the probit likelihood (closed-form tilted "
            f"moments); got {type(likelihood).__name__}. Use PairwiseLaplaceGP for "
            "the logit."
        )
    check_form_and_device(form, comparisons, chol_prior)
    check_ep_options(max_iter, tol, damping, anderson_memory)
    with torch.no_grad():
        L = chol_prior
        if form == "auto":
            form = auto_form(L)
        return _run_ep(
            L,
            comparisons,
            likelihood,
            init,
            max_iter,
            tol,
            damping,
            form == "precision",
            anderson_memory,
        )


def _run_ep(
    L, comparisons, likelihood, init, max_iter, tol, damping, precision, anderson_memory
):
    n = L.shape[-1]
    batch = L.shape[:-2]
    dtype = L.dtype
    tol = default_tol(dtype) if tol is None else tol
    s2 = likelihood.scale**2
    comps = comparisons.expand(batch + comparisons.shape[-2:])
    Kinv = row_major(torch.cholesky_inverse(L)) if precision else None
    index = laplacian_index(comps, n)
    prior_diag = (L * L).sum(-1)  # diag K, for the stiffness test
    tau, nu = _initial_sites(init, comps, dtype, L.device)
    converged = torch.zeros(batch, dtype=torch.bool, device=L.device)
    step = torch.full(
        batch, 1.0 if damping is None else damping, dtype=dtype, device=L.device
    )
    last_change = torch.full(batch, float("inf"), dtype=dtype, device=L.device)
    anderson = Anderson(anderson_memory) if anderson_memory > 0 else None
    last_d = None  # the last sweep's (d_tau, d_nu)
    streak = torch.zeros(batch, dtype=torch.long, device=L.device)
    stopping = StoppingTest(tol, change=torch.full_like(last_change, float("inf")))

    def sweep(tau, nu):
        q = _gaussian(
            L, Kinv, tau, nu, comps, index, precision, prior_diag, with_logdet=False
        )
        if bool((q.info > 0).any()):
            raise NumericalError(
                "EP: the approximate posterior precision is not positive definite; "
                "check the kernel hyperparameters."
            )
        check_holdable(tau, comps, prior_diag, likelihood.scale / 2**0.5)
        tau_c, nu_c, valid = _cavities(q, tau, nu, comps, index)
        vc = 1.0 / tau_c
        mc = nu_c * vc
        root = (s2 + vc).sqrt()
        _, lam, w, _ = likelihood._terms(mc / root)
        denom = s2 + vc * (1.0 - w)
        return (
            torch.where(valid, w / denom, tau),
            torch.where(valid, (mc * w + lam * root) / denom, nu),
        )

    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (read after the loop)
        tau_new, nu_new = sweep(tau, nu)
        d_tau, d_nu = tau_new - tau, nu_new - nu
        change = site_change(d_tau, d_nu, tau, nu)
        if damping is None:  # see adapt_step
            step, streak = adapt_step(
                step, change, last_change, d_tau, d_nu, last_d, streak
            )
            last_change, last_d = change, (d_tau, d_nu)
        converged = stopping(change, sweep, tau, nu, tau_new, nu_new)
        tau = tau + step.unsqueeze(-1) * d_tau
        nu = nu + step.unsqueeze(-1) * d_nu
        if bool(converged.all()):
            break
        if anderson is not None and it >= ANDERSON_FROM:
            tau, nu = anderson.extrapolate(tau, nu, d_tau, d_nu, step, converged)
    if not bool(converged.all()):
        warnings.warn(
            f"EP stopped after {max_iter} sweeps with {int((~converged).sum())} of "
            f"{converged.numel()} batch elements not converged (tol={tol:g}); raise "
            "max_iter, lower damping or loosen tol.",
            ConvergenceWarning,
            stacklevel=3,
        )
    q = _gaussian(L, Kinv, tau, nu, comps, index, precision, prior_diag)
    tau_c, nu_c, valid = _cavities(q, tau, nu, comps, index)
    vc = 1.0 / tau_c
    mc = nu_c * vc
    logZ_hat = likelihood._log_prob(mc / (s2 + vc).sqrt())
    site = (
        logZ_hat
        + 0.5 * torch.log1p(tau / tau_c)
        - 0.5 * (nu + nu_c) ** 2 / (tau + tau_c)
        + 0.5 * nu_c**2 / tau_c
    )
    evidence = (
        -0.5 * q.logdet
        + 0.5 * (q.b * q.mu).sum(-1)
        + torch.where(valid, site, torch.zeros_like(site)).sum(-1)
    )
    state = EPState(
        mode=q.mu,
        chol_prior=L,
        alpha=q.alpha,
        curvature=tau,
        comparisons=comps,
        log_likelihood=torch.where(valid, logZ_hat, torch.zeros_like(site)).sum(-1),
        evidence=evidence,
        converged=converged,
        iterations=it,
        form="precision" if precision and q.factors is None else "whitened",
        site_nu=nu,
        invalid_cavities=(~valid).sum(-1),
    )
    state._post_cov = q.S
    if q.factors is not None:
        state._projector, state._stiff_factors = q.projector, q.factors
    elif not precision:
        state._chol_post = q.C
    return state


class EPEvidence(torch.autograd.Function):
    r"""EP log evidence as a differentiable function of the prior covariance.

    Backward: ``∂ log Z_EP / ∂K = ½ (ααᵀ - R)``, exact at the EP fixed point.
    """

    @staticmethod
    def forward(ctx, K, comparisons, likelihood, init, options, out):  # noqa: D102
        with limited(K.shape[:-1].numel()):
            L = jittered_cholesky(K.detach(), name="prior covariance K")
            state = run_ep(L, comparisons, likelihood, init, **options)
        out["state"] = state
        ctx.state = state
        return state.evidence.clone()

    @staticmethod
    def backward(ctx, grad_out):  # noqa: D102
        state: EPState = ctx.state
        with limited(state.mode.shape.numel()):
            M = evidence_kernel_gradient(state, state.curvature)
        return (0.5 * grad_out)[..., None, None] * M, None, None, None, None, None


def ep_evidence(
    K: Tensor,
    comparisons: Tensor,
    likelihood: PairwiseLikelihood,
    init: EPState | EPSites | None = None,
    **options,
) -> tuple[Tensor, EPState]:
    r"""EP log evidence, differentiable in ``K``, and the EP state.

    Args:
        K: ``batch_shape x n x n`` prior covariance at the designs.
        comparisons: ``batch_shape x m x 2`` long ``[winner, loser]`` rows.
        likelihood: The probit likelihood.
        init: Optional previous state to warm-start the sites.
        **options: Passed to :func:`run_ep`.

    Returns:
        ``(evidence, state)``.
    """
    out: dict = {}
    evidence = EPEvidence.apply(K, comparisons, likelihood, init, options, out)
    return evidence, out["state"]
