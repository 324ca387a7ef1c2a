r"""Damped Newton for the Laplace mode of pairwise preference GPs, in one form.

Newton's method (Rasmussen & Williams 2006, alg. 3.1; Chu & Ghahramani 2005)
is run on the whitened utilities ``v`` with ``f = L v`` and ``K = L Lᵀ``,
maximising ``Ψ(v) = log p(D | L v) - ½ |v|²``. Its negative Hessian is the
symmetric

    A = I + Lᵀ W L,      W = Dᵀ diag(ω) D  (the weighted comparison Laplacian),

whose eigenvalues are all ``≥ 1``: its Cholesky factor always exists and is
well conditioned, ``W`` (singular: ``W·1 = 0``) is never inverted and ``K`` is
never inverted either. The precision form steps with ``B = K⁻¹ + W`` instead
(see :func:`~prefbo.inference.find_mode`, which picks the form). Steps are
damped by a vectorised line search (the largest of ``1, ½, ¼, …`` that does
not decrease ``Ψ``), batch elements are independent problems solved by tensor
ops. On an accelerator the host reads the device once per iteration (the
stiffness test, which picks the step's form) and the convergence flags every
``sync_every`` steps, a bounded number of times per solve however large the
batch.

A run goes: the start (cold or warm), the iteration (direction, damped step),
the check that the last system factorised, the precision form's refinement of
the end point, and the :class:`~prefbo.inference.GaussianApproximation` it
ends in.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from prefbo.exceptions import ConvergenceWarning, NumericalError
from prefbo.inference.cholesky import cholesky_solve, row_major
from prefbo.inference.gaussian import GaussianApproximation
from prefbo.inference.laplacian import (
    cholesky_plus_laplacian,
    laplacian_index,
    laplacian_matmul,
    pair_diff,
    scatter_pairs,
)
from prefbo.inference.stiff import is_stiff, stiff_projector, stiff_solve
from prefbo.inference.warm_start import warm_candidates
from prefbo.likelihoods.pairwise import PairwiseLikelihood

REFINE_STEPS = 4  # precision form: iterative-refinement steps at most


def newton_mode(
    L: Tensor,
    comparisons: Tensor,
    likelihood: PairwiseLikelihood,
    init: Tensor | GaussianApproximation | None,
    max_iter: int,
    tol: float,
    num_halvings: int,
    sync_every: int | None,
    precision: bool,
) -> GaussianApproximation | None:
    r"""The Laplace mode by damped Newton in one form of the system.

    Args:
        L: ``batch_shape x n x n`` lower Cholesky factor of the prior
            covariance ``K``.
        comparisons: ``batch_shape x m x 2`` long ``[winner, loser]`` rows, on
            ``L``'s device.
        likelihood: The pairwise likelihood.
        init: Optional ``batch_shape x n`` warm start, or a previous
            :class:`~prefbo.inference.GaussianApproximation`.
        max_iter: Newton iteration budget.
        tol: Step tolerance: converged where ``max|Δf| ≤ tol · (1 + max|f|)``.
        num_halvings: Step sizes ``1, ½, …, 2^-num_halvings`` of the line
            search.
        sync_every: Read the convergence flags every this many iterations
            (``None``: 1 on CPU, 4 elsewhere).
        precision: The precision form ``K⁻¹ + W`` (else the whitened
            ``I + Lᵀ W L``).

    Returns:
        The :class:`~prefbo.inference.GaussianApproximation` at the mode, or
        ``None`` where the precision form gives up (stiff curvature, a system
        that does not factorise, a refinement that does not settle): the
        caller then runs the whitened form.

    Raises:
        NumericalError: The whitened system does not factorise (a non-finite
            curvature).
    """
    run = _NewtonRun(
        L, comparisons, likelihood, tol, num_halvings, sync_every, precision
    )
    it = run.iterate(run.start(init), max_iter)
    if it is None or not run.check_factorised(it):
        return None
    _warn_unconverged(it.converged, max_iter, run.tol)
    if precision and not run.refine(it):
        return None
    return run.approximation(it)


def _warn_unconverged(converged: Tensor, max_iter: int, tol: float) -> None:
    if not bool(converged.all()):
        warnings.warn(
            f"Laplace mode finding stopped after {max_iter} Newton iterations with "
            f"{int((~converged).sum())} of {converged.numel()} batch elements not "
            f"converged (tol={tol:g}); raise max_iter or tol.",
            ConvergenceWarning,
            stacklevel=4,  # the caller of find_mode
        )


def _logdet_sylvester(L: Tensor, omega: Tensor, comps: Tensor) -> Tensor | None:
    r"""``log|I + KW|`` as ``log|I + BᵀB| = log|I + BBᵀ|`` (the smaller),
    ``B = diag(√ω) D L``: eigenvalues ``≥ 1``, accurate for any ``cond(K)``;
    ``None`` where ``ω < 0`` or the factorisation fails."""
    if not bool((omega >= 0).all()):
        return None
    n, m = L.shape[-1], comps.shape[-2]
    if m <= n:
        rows = comps.unsqueeze(-1).expand(comps.shape + (n,))  # batch x m x 2 x n
        B = L.gather(-2, rows[..., 0, :]) - L.gather(-2, rows[..., 1, :])
        B = B * omega.sqrt().unsqueeze(-1)
        M = B @ B.mT
    else:  # BᵀB = Lᵀ W L, W applied sparsely
        M = L.mT @ laplacian_matmul(omega, comps, L)
    M.diagonal(dim1=-2, dim2=-1).add_(1.0)
    C, info = torch.linalg.cholesky_ex(M)
    if bool((info > 0).any()):
        return None
    return 2 * C.diagonal(dim1=-2, dim2=-1).log().sum(-1)


def _mv(M: Tensor, x: Tensor) -> Tensor:
    r"""``M x`` for ``batch x n x n`` ``M`` and ``batch x n`` ``x``."""
    return (M @ x.unsqueeze(-1)).squeeze(-1)


@dataclass(eq=False)
class _Iterate:
    r"""Newton's iterate and what it carries between steps.

    ``p`` are the prior coordinates (``v = L⁻¹f`` whitened; ``f`` itself in
    the precision form) and ``pm`` the prior metric applied to them (``v``,
    or ``K⁻¹f``), so that the prior term of ``Ψ`` is ``½ p·pm``. ``derivs``
    are the likelihood's ``(log p, ∇, ω, ∂ω)`` per comparison at ``f``; ``C``
    and ``info`` the factor of the latest Newton system and ``curvature`` the
    ``ω`` it was built with.
    """

    f: Tensor
    p: Tensor
    pm: Tensor
    derivs: tuple[Tensor, Tensor, Tensor, Tensor]
    converged: Tensor
    iterations: int = 0
    C: Tensor | None = None
    info: Tensor | None = None
    curvature: Tensor | None = None
    alpha: Tensor | None = None
    projector: Tensor | None = None  # stiff curvature: P = I - A⁻¹ instead of C
    logdet: Tensor | None = None  # and log det A
    stiff_factors: tuple | None = None  # and stiff_projector's factors


@dataclass(eq=False)
class _Direction:
    r"""One Newton direction: ``Δf``, ``Δp``, ``Δpm`` and ``DΔf``, the factor
    ``C`` of the system (and ``info``) and ``pm`` at the current iterate."""

    C: Tensor | None
    info: Tensor
    df: Tensor
    dp: Tensor
    dpm: Tensor
    diff: Tensor
    pm: Tensor
    projector: Tensor | None = None
    logdet: Tensor | None = None
    stiff_factors: tuple | None = None


class _NewtonRun:
    r"""One damped Newton run in one form for a batch of problems: the fixed
    quantities (``L``, the comparisons broadcast to the batch, the step sizes
    of the line search, tolerances) and the steps of the iteration."""

    def __init__(
        self,
        L: Tensor,
        comparisons: Tensor,
        likelihood: PairwiseLikelihood,
        tol: float,
        num_halvings: int,
        sync_every: int | None,
        precision: bool,
    ) -> None:
        self.L, self.Lt = L, L.transpose(-1, -2)
        self.likelihood = likelihood
        self.n = L.shape[-1]
        dtype, self.device = L.dtype, L.device
        self.on_cpu = self.device.type == "cpu"
        self.tol = tol
        self.psi_tol = 1e-13 if dtype == torch.float64 else 1e-6
        if sync_every is None:
            sync_every = 1 if self.on_cpu else 4
        self.sync_every = sync_every
        self.batch = L.shape[:-2]
        self.steps = 2.0 ** -torch.arange(
            num_halvings + 1, dtype=dtype, device=self.device
        )
        # J x 1.. x 1
        self.steps_b = self.steps.view((-1,) + (1,) * (len(self.batch) + 1))
        self.comps = comparisons.expand(self.batch + comparisons.shape[-2:])
        self.comps_ls = self.comps.expand((len(self.steps),) + self.comps.shape)
        self.precision = precision
        # precision form: K⁻¹ (row-major) and the positions of W's entries
        self.Kinv = row_major(torch.cholesky_inverse(L)) if precision else None
        self.lap_index = laplacian_index(self.comps, self.n) if precision else None
        self.prior_diag = (L * L).sum(-1)  # diag K, for the stiffness test

    # ------------------------------------------------------------- start
    def start(self, init: Tensor | GaussianApproximation | None) -> _Iterate:
        r"""The start: ``f = 0``, or a warm start where its ``Ψ`` is higher."""
        f = torch.zeros(self.batch + (self.n,), dtype=self.L.dtype, device=self.device)
        p, pm = f.clone(), f.clone()
        prev = init if isinstance(init, GaussianApproximation) else None
        if prev is not None:
            init = prev.mode
        if init is not None:
            lik, comps = self.likelihood, self.comps
            best = lik._log_prob_pairs(f, comps).sum(-1)  # Ψ at f = 0
            candidates = warm_candidates(
                init, prev, self.L, self.comps, self.likelihood, self.Kinv
            )
            for fc, pc, pmc in candidates:
                psi_c = lik._log_prob_pairs(fc, comps).sum(-1) - 0.5 * (pc * pmc).sum(
                    -1
                )
                better = psi_c > best
                best = torch.where(better, psi_c, best)
                better = better.unsqueeze(-1)
                f = torch.where(better, fc, f)
                p = torch.where(better, pc, p)
                pm = torch.where(better, pmc, pm)
        converged = torch.zeros(self.batch, dtype=torch.bool, device=self.device)
        return _Iterate(f, p, pm, self.likelihood.derivatives(f, self.comps), converged)

    # --------------------------------------------------------- iteration
    def iterate(self, it: _Iterate, max_iter: int) -> _Iterate | None:
        r"""Damped Newton steps until every batch element converged or the
        budget is spent; ``None`` if the precision form's system failed to
        factorise (on CPU, where that is checked at every step)."""
        for k in range(1, max_iter + 1):
            it.iterations = k
            it.curvature = it.derivs[2]  # the curvature C is factorised at
            stiff = is_stiff(it.curvature, self.comps, self.prior_diag)
            if stiff and self.precision:  # K⁻¹ + W loses K⁻¹: whitened form
                return None
            direction = self._direction(it, stiff)
            it.C, it.info = direction.C, direction.info
            it.projector, it.logdet = direction.projector, direction.logdet
            it.stiff_factors = direction.stiff_factors
            if self.on_cpu and bool((direction.info > 0).any()):
                if self.precision:
                    return None
                break
            self._damped_step(it, direction)
            if k % self.sync_every == 0 and bool(it.converged.all()):
                break
        return it

    def _direction(self, it: _Iterate, stiff: bool) -> _Direction:
        if self.precision:
            return self._precision_direction(it)
        if stiff:
            return self._stiff_direction(it)
        return self._whitened_direction(it)

    def _precision_direction(self, it: _Iterate) -> _Direction:
        r"""The step ``B⁻¹ ∇Ψ`` with ``B = K⁻¹ + W`` and the true gradient
        ``∇Ψ = ∇ℓ - K⁻¹f``, ``K⁻¹f`` from the backward-stable solve with
        ``L``: the explicit ``K⁻¹`` (in ``B`` only) then slows the convergence
        at worst, it does not move the mode. ``K⁻¹Δf = ∇Ψ - WΔf`` since
        ``BΔf = ∇Ψ``: a sparse product, for ``Ψ``'s quadratic model only."""
        L, comps, n = self.L, self.comps, self.n
        _, grad_k, omega, _ = it.derivs
        C, info = cholesky_plus_laplacian(self.Kinv, omega, self.lap_index)  # K⁻¹+W
        pm = cholesky_solve(it.f.unsqueeze(-1), L).squeeze(-1)
        g = scatter_pairs(grad_k, comps, n) - pm
        df = cholesky_solve(g.unsqueeze(-1), C).squeeze(-1)
        diff = pair_diff(df, comps)
        dpm = g - scatter_pairs(omega * diff, comps, n)
        return _Direction(C, info, df, df, dpm, diff, pm)

    def _whitened_direction(self, it: _Iterate) -> _Direction:
        r"""The Newton step in ``v``: ``A v_new = Lᵀ W L v + Lᵀ ∇ℓ`` with
        ``A = I + Lᵀ W L``."""
        L, Lt, comps, n = self.L, self.Lt, self.comps, self.n
        _, grad_k, omega, _ = it.derivs
        grad = scatter_pairs(grad_k, comps, n)  # batch x n
        LtWL = Lt @ laplacian_matmul(omega, comps, L)
        A = LtWL.clone()
        A.diagonal(dim1=-2, dim2=-1).add_(1.0)
        C, info = torch.linalg.cholesky_ex(A)
        rhs = _mv(LtWL, it.p) + _mv(Lt, grad)
        dp = cholesky_solve(rhs.unsqueeze(-1), C).squeeze(-1) - it.p
        df = _mv(L, dp)
        return _Direction(C, info, df, dp, dp, pair_diff(df, comps), it.pm)

    def _stiff_direction(self, it: _Iterate) -> _Direction:
        r"""The whitened Newton step ``A⁻¹ ∇Ψ = A⁻¹(Lᵀ∇ℓ - v)`` for a stiff
        curvature, by :func:`~prefbo.inference.stiff.stiff_solve` (``A`` is
        not formed)."""
        L, comps = self.L, self.comps
        _, grad_k, omega, _ = it.derivs
        P, logdet, factors = stiff_projector(L, omega, comps)
        dp = stiff_solve(P, factors, grad_k, it.p)
        df = _mv(L, dp)
        info = torch.zeros(self.batch, dtype=torch.int32, device=self.device)
        return _Direction(
            None, info, df, dp, dp, pair_diff(df, comps), it.pm, P, logdet, factors
        )

    def _damped_step(self, it: _Iterate, d: _Direction) -> None:
        r"""Take the damped step along ``d``, update the convergence flags and
        the derivatives at the new iterate."""
        p, pm, logp, omega = it.p, d.pm, it.derivs[0], it.derivs[2]
        # vectorised damping: Ψ(t) = Σ log p(f + tΔf) - ½(a + 2tb + t²c)
        a, b, c = (p * pm).sum(-1), (d.dp * pm).sum(-1), (d.dp * d.dpm).sum(-1)
        psi0 = logp.sum(-1) - 0.5 * a  # batch
        t, any_ok, at_full = self._step_size(it.f, d.df, psi0, a, b, c)
        # converged: a negligible Newton step, no step size that increases Ψ
        # (stationary to working precision), or a Newton decrement ½ΔfᵀHΔf
        # (the predicted gain in Ψ) at the level of rounding in Ψ, below which
        # the precision form cannot improve
        decrement = 0.5 * (c + (omega * d.diff * d.diff).sum(-1))
        small = d.df.abs().amax(-1) <= self.tol * (1.0 + it.f.abs().amax(-1))
        if d.projector is not None:
            # stiff: the answers resolve utility differences far below tol
            # (a probit's scale s): only the decrement tells convergence
            small = torch.zeros_like(small)
        flat = decrement <= self.psi_tol * (1.0 + psi0.abs())
        it.converged = (small | flat | ~any_ok) & (d.info == 0)
        tt = t.unsqueeze(-1)
        it.f, it.p, it.pm = it.f + tt * d.df, p + tt * d.dp, pm + tt * d.dpm
        if at_full is not None:
            it.derivs = at_full
        else:
            it.derivs = self.likelihood.derivatives(it.f, self.comps)

    def _step_size(
        self, f: Tensor, df: Tensor, psi0: Tensor, a: Tensor, b: Tensor, c: Tensor
    ) -> tuple[Tensor, Tensor, tuple | None]:
        r"""The largest step size ``t`` of ``1, ½, …`` with ``Ψ(t) ≥ Ψ(0)`` per
        batch element (``0`` where none), whether one exists, and the
        likelihood's derivatives at the full step where that was taken (on
        CPU the full step is tried alone first, the usual case; else all
        step sizes at once)."""
        lik = self.likelihood
        at_full = None
        if self.on_cpu:
            at_full = lik.derivatives(f + df, self.comps)
            if not bool((at_full[0].sum(-1) - 0.5 * (a + 2 * b + c) >= psi0).all()):
                at_full = None
        if at_full is not None:
            return (
                torch.ones_like(psi0),
                torch.ones_like(psi0, dtype=torch.bool),
                at_full,
            )
        steps, steps_b = self.steps, self.steps_b
        t_b = steps_b.squeeze(-1)
        psi = lik._log_prob_pairs(f + steps_b * df, self.comps_ls).sum(-1) - 0.5 * (
            a + 2 * t_b * b + t_b**2 * c
        )  # J x batch
        ok = psi >= psi0
        any_ok = ok.any(0)
        first = torch.argmax(ok.to(torch.int8), dim=0)  # batch
        t_first = steps.take(first)  # (indexing by a 0-d tensor would sync)
        t = torch.where(any_ok, t_first, torch.zeros_like(t_first))
        return t, any_ok, None

    # ----------------------------------------------------------- the end
    def check_factorised(self, it: _Iterate) -> bool:
        r"""Whether the last Newton system factorised; raises in the whitened
        form if not (its ``A`` has eigenvalues ``≥ 1``: only a non-finite
        curvature breaks it)."""
        if bool((it.info > 0).any()):
            if self.precision:
                return False
            raise NumericalError(
                "Cholesky of I + Lᵀ W L failed; the likelihood curvature is not "
                "finite. Check the kernel hyperparameters and the data for extreme "
                "values."
            )
        return True

    def refine(self, it: _Iterate) -> bool:
        r"""Precision form: check the end point with the true gradient
        ``∇ℓ(f) - K⁻¹f`` (``K⁻¹f`` from the backward-stable solve with ``L``)
        preconditioned by the loop's factor, and step where it is not
        stationary. The loop's steps use that gradient, so this rarely moves
        ``f``; when it does, the factor is recomputed at the new point so that
        the log determinant and ``Σ`` belong to it. ``False`` if it does not
        settle within ``REFINE_STEPS`` (the whitened form then decides)."""
        L, comps, n = self.L, self.comps, self.n
        f = it.f
        alpha = cholesky_solve(f.unsqueeze(-1), L).squeeze(-1)
        moved = torch.zeros(self.batch, dtype=torch.bool, device=self.device)
        for step_no in range(REFINE_STEPS + 1):
            g = scatter_pairs(it.derivs[1], comps, n) - alpha
            step = cholesky_solve(g.unsqueeze(-1), it.C).squeeze(-1)
            big = step.abs().amax(-1) > self.tol * (1.0 + f.abs().amax(-1))
            if not bool(big.any()):
                break
            if step_no == REFINE_STEPS:
                return False
            moved |= big
            f = f + torch.where(big.unsqueeze(-1), step, torch.zeros_like(step))
            it.derivs = self.likelihood.derivatives(f, comps)
            alpha = cholesky_solve(f.unsqueeze(-1), L).squeeze(-1)
        it.f, it.alpha = f, alpha
        if bool(moved.any()):
            omega = it.derivs[2]
            if is_stiff(omega, comps, self.prior_diag):
                return False
            it.C, info = cholesky_plus_laplacian(self.Kinv, omega, self.lap_index)
            it.curvature = omega
            if bool((info > 0).any()):
                return False
        return True

    def approximation(self, it: _Iterate) -> GaussianApproximation:
        r"""The :class:`GaussianApproximation` at the final iterate."""
        L, C, f = self.L, it.C, it.f
        logp, _, omega, domega = it.derivs
        log_lik = logp.sum(-1)
        if self.precision:
            alpha = it.alpha
        else:
            alpha = torch.linalg.solve_triangular(
                self.Lt, it.p.unsqueeze(-1), upper=True
            )
            alpha = alpha.squeeze(-1)
        # log|I + KW| at the returned mode: C is the last Newton system's, a
        # step behind it (the evidence was off by that step times ∂ log|A|/∂f,
        # noise of 1e-7 under a fit's tol), and log|K⁻¹ + W| + log|K| cancels
        # when K is ill conditioned; a stiff P is taken at the mode
        if it.projector is not None:
            it.curvature = omega
            it.projector, logdet, it.stiff_factors = stiff_projector(
                L, omega, self.comps
            )
        else:
            logdet = _logdet_sylvester(L, omega, self.comps)
        if logdet is None:
            logdet = 2 * C.diagonal(dim1=-2, dim2=-1).log().sum(-1)
            if self.precision:
                logdet = logdet + 2 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        state = GaussianApproximation(
            mode=f,
            chol_prior=L,
            alpha=alpha,
            curvature=it.curvature,
            comparisons=self.comps,
            log_likelihood=log_lik,
            evidence=log_lik - 0.5 * (f * alpha).sum(-1) - 0.5 * logdet,
            converged=it.converged,
            iterations=it.iterations,
            form="precision" if self.precision else "whitened",
        )
        if self.precision:
            state._post_cov = row_major(torch.cholesky_inverse(C))
        elif it.projector is not None:
            state._projector = it.projector
            state._stiff_factors = it.stiff_factors
        else:
            state._chol_post = C
        state._mode_derivatives = (omega, domega)  # at the returned mode
        return state
