r"""Batched Laplace approximation for pairwise preference GPs (SPEC §3).

Newton's method is run on the whitened utilities ``v`` with ``f = L v`` and
``K = L Lᵀ``, maximising ``Ψ(v) = log p(D | L v) - ½ |v|²``. Its negative
Hessian is the symmetric

    A = I + Lᵀ W L,      W = Dᵀ diag(ω) D  (the weighted comparison Laplacian),

whose eigenvalues are all ``≥ 1``: its Cholesky factor always exists and is
well conditioned, ``W`` (singular: ``W·1 = 0``) is never inverted and ``K`` is
never inverted either. Steps are damped by a vectorised line search (the
largest of ``1, ½, ¼, …`` that does not decrease ``Ψ``), batch elements are
independent problems solved by tensor ops, and there is no host round trip
inside an iteration except the convergence test (every ``sync_every`` steps).

At the mode ``f̂`` the state caches ``L``, the factor ``C`` of ``A`` and
``α = K⁻¹ f̂ = L⁻ᵀ v̂``; the predictive mean at ``x*`` is ``k*ᵀ α`` and the
covariance ``k** - uᵀu + wᵀw`` with ``u = L⁻¹ k*`` and ``w = (L C)⁻¹ k*``.

The evidence ``log p(D|f̂) - ½ f̂ᵀK⁻¹f̂ - ½ log|I + K Ŵ|`` is differentiable in
``K`` through :class:`LaplaceEvidence`, whose backward is the analytic gradient
including the dependence of ``f̂`` on ``K`` (implicit function theorem).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from prefbo.exceptions import ConvergenceWarning, NumericalError
from prefbo.inference.cholesky import jittered_cholesky
from prefbo.likelihoods.pairwise import PairwiseLikelihood


@dataclass
class LaplaceState:
    r"""The Laplace approximation at the mode, for a batch of problems.

    Attributes:
        mode: ``batch_shape x n`` mode ``f̂`` of the utilities at the designs.
        chol_prior: ``batch_shape x n x n`` lower factor ``L`` of ``K``.
        chol_post: ``batch_shape x n x n`` lower factor ``C`` of
            ``A = I + Lᵀ Ŵ L``.
        alpha: ``batch_shape x n`` vector ``K⁻¹ f̂``.
        curvature: ``batch_shape x m`` weights ``ω`` with ``Ŵ = Dᵀ diag(ω) D``.
        log_likelihood: ``batch_shape`` value of ``log p(D | f̂)``.
        evidence: ``batch_shape`` Laplace log evidence.
        converged: ``batch_shape`` bool, whether the Newton step fell below
            the tolerance.
        iterations: Newton iterations taken.
    """

    mode: Tensor
    chol_prior: Tensor
    chol_post: Tensor
    alpha: Tensor
    curvature: Tensor
    log_likelihood: Tensor
    evidence: Tensor
    converged: Tensor
    iterations: int
    _pred_factors: Tensor | None = None

    def predictive_factors(self) -> Tensor:
        r"""``batch_shape x 2 x n x n`` stack of ``L`` and ``L C`` (cached)."""
        if self._pred_factors is None:
            self._pred_factors = torch.stack(
                [self.chol_prior, self.chol_prior @ self.chol_post], dim=-3
            )
        return self._pred_factors

    def covariance_root(self) -> Tensor:
        r"""``batch_shape x n x n`` factor ``F = L C⁻ᵀ`` of the posterior
        covariance ``(K⁻¹ + Ŵ)⁻¹ = F Fᵀ`` at the designs."""
        return torch.linalg.solve_triangular(
            self.chol_post, self.chol_prior.transpose(-1, -2), upper=False
        ).transpose(-1, -2)


def scatter_pairs(values: Tensor, comparisons: Tensor, n: int) -> Tensor:
    r"""``Dᵀ values``: add each comparison's value at its winner, subtract it
    at its loser.

    Args:
        values: ``batch_shape x m`` per-comparison values.
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows.
        n: number of designs.

    Returns:
        ``batch_shape x n``.
    """
    out = values.new_zeros(values.shape[:-1] + (n,))
    out.scatter_add_(-1, comparisons[..., 0], values)
    out.scatter_add_(-1, comparisons[..., 1], -values)
    return out


def comparison_laplacian(weights: Tensor, comparisons: Tensor, n: int) -> Tensor:
    r"""Dense weighted comparison Laplacian ``W = Dᵀ diag(weights) D``.

    Args:
        weights: ``batch_shape x m`` non-negative weights.
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows.
        n: number of designs.

    Returns:
        ``batch_shape x n x n`` symmetric PSD matrix with ``W·1 = 0``.
    """
    w, l = comparisons[..., 0], comparisons[..., 1]
    index = torch.cat([w * n + w, l * n + l, w * n + l, l * n + w], dim=-1)
    src = torch.cat([weights, weights, -weights, -weights], dim=-1)
    out = weights.new_zeros(weights.shape[:-1] + (n * n,))
    out.scatter_add_(-1, index, src)
    return out.view(weights.shape[:-1] + (n, n))


def _default_tol(dtype: torch.dtype) -> float:
    return 1e-9 if dtype == torch.float64 else 1e-4


def find_mode(
    chol_prior: Tensor,
    comparisons: Tensor,
    likelihood: PairwiseLikelihood,
    init: Tensor | None = None,
    *,
    max_iter: int = 100,
    tol: float | None = None,
    num_halvings: int = 10,
    sync_every: int | None = None,
) -> LaplaceState:
    r"""Find the Laplace mode of a batch of pairwise-probit/logit problems.

    Args:
        chol_prior: ``batch_shape x n x n`` lower Cholesky factor of the prior
            covariance ``K``.
        comparisons: ``batch_shape x m x 2`` long ``[winner, loser]`` rows.
        likelihood: The pairwise likelihood.
        init: Optional ``batch_shape x n`` warm start (e.g. the last mode).
        max_iter: Newton iteration budget.
        tol: Stop when every batch element's Newton step has
            ``max|Δf| ≤ tol · (1 + max|f|)``; default ``1e-9`` (float64) or
            ``1e-4`` (float32).
        num_halvings: Step sizes ``1, ½, …, 2^-num_halvings`` are tried at
            once; the largest that does not decrease ``Ψ`` is taken.
        sync_every: Read the on-device convergence flags every this many
            iterations (default 1 on CPU, where it is free, 4 on CUDA).

    Returns:
        The :class:`LaplaceState` at the mode (detached from autograd).
    """
    with torch.no_grad():
        return _find_mode(
            chol_prior, comparisons, likelihood, init, max_iter, tol, num_halvings,
            sync_every,
        )


def _find_mode(L, comparisons, likelihood, init, max_iter, tol, num_halvings,
               sync_every) -> LaplaceState:
    n = L.shape[-1]
    dtype, device = L.dtype, L.device
    tol = _default_tol(dtype) if tol is None else tol
    if sync_every is None:
        sync_every = 1 if device.type == "cpu" else 4
    batch = L.shape[:-2]
    eye = torch.eye(n, dtype=dtype, device=device)
    steps = 2.0 ** -torch.arange(num_halvings + 1, dtype=dtype, device=device)
    steps_b = steps.view((-1,) + (1,) * (len(batch) + 1))  # J x 1.. x 1
    comps_j = comparisons.expand(batch + comparisons.shape[-2:])
    v = torch.zeros(batch + (n,), dtype=dtype, device=device)
    f = torch.zeros_like(v)
    if init is not None:
        # Warm start at f0 = K ∇ℓ(init), i.e. v0 = Lᵀ ∇ℓ(init): exact at a
        # previous mode under the same K, and always well scaled under a new K
        # (unlike L⁻¹ init). Kept per batch element only where Ψ beats f = 0.
        _, g0, _, _ = likelihood.derivatives(init.to(L).expand(batch + (n,)), comps_j)
        v0 = (L.transpose(-1, -2) @ scatter_pairs(g0, comps_j, n).unsqueeze(-1))
        v0 = v0.squeeze(-1)
        f0 = (L @ v0.unsqueeze(-1)).squeeze(-1)
        psi_init = likelihood.log_prob_answers(f0, comps_j).sum(-1) - 0.5 * v0.pow(
            2
        ).sum(-1)
        psi_zero = likelihood.log_prob_answers(f, comps_j).sum(-1)
        better = (psi_init > psi_zero).unsqueeze(-1)
        v = torch.where(better, v0, v)
        f = torch.where(better, f0, f)
    converged = torch.zeros(batch, dtype=torch.bool, device=device)
    it = 0
    for it in range(1, max_iter + 1):
        logp, grad_k, omega, _ = likelihood.derivatives(f, comps_j)
        grad = scatter_pairs(grad_k, comps_j, n)  # batch x n
        W = comparison_laplacian(omega, comps_j, n)  # batch x n x n
        LtWL = L.transpose(-1, -2) @ (W @ L)
        A = LtWL + eye
        C, info = torch.linalg.cholesky_ex(A)
        rhs = (LtWL @ v.unsqueeze(-1)).squeeze(-1) + (
            L.transpose(-1, -2) @ grad.unsqueeze(-1)
        ).squeeze(-1)
        v_new = torch.cholesky_solve(rhs.unsqueeze(-1), C).squeeze(-1)
        dv = v_new - v
        df = (L @ dv.unsqueeze(-1)).squeeze(-1)
        # vectorised damping: Ψ at every candidate step size at once
        psi0 = logp.sum(-1) - 0.5 * v.pow(2).sum(-1)  # batch
        f_try = f + steps_b * df  # J x batch x n
        v_try = v + steps_b * dv
        psi = likelihood.log_prob_answers(
            f_try, comps_j.expand((len(steps),) + comps_j.shape)
        ).sum(-1) - 0.5 * v_try.pow(2).sum(-1)  # J x batch
        ok = psi >= psi0
        first = torch.argmax(ok.to(torch.uint8), dim=0)  # batch
        t = torch.where(ok.any(0), steps[first], torch.zeros_like(steps[first]))
        scale = 1.0 + f.abs().amax(-1)
        # converged: a negligible Newton step, or no step size that increases Ψ
        # (stationary to working precision)
        converged = ((df.abs().amax(-1) <= tol * scale) | ~ok.any(0)) & (info == 0)
        v = v + t.unsqueeze(-1) * dv
        f = f + t.unsqueeze(-1) * df
        if it % sync_every == 0 and bool(converged.all()):
            break
    if bool((info > 0).any()):
        raise NumericalError(
            "Cholesky of I + Lᵀ W L failed; the likelihood curvature is not finite. "
            "Check the kernel hyperparameters and the data for extreme values."
        )
    if not bool(converged.all()):
        warnings.warn(
            f"Laplace mode finding stopped after {max_iter} Newton iterations with "
            f"{int((~converged).sum())} of {converged.numel()} batch elements not "
            f"converged (tol={tol:g}); raise max_iter or tol.",
            ConvergenceWarning,
            stacklevel=3,
        )
    logp, _, omega_f, _ = likelihood.derivatives(f, comps_j)
    alpha = torch.linalg.solve_triangular(
        L.transpose(-1, -2), v.unsqueeze(-1), upper=True
    ).squeeze(-1)
    log_lik = logp.sum(-1)
    evidence = (
        log_lik
        - 0.5 * v.pow(2).sum(-1)
        - C.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    )
    return LaplaceState(
        mode=f,
        chol_prior=L,
        chol_post=C,
        alpha=alpha,
        curvature=omega,
        log_likelihood=log_lik,
        evidence=evidence,
        converged=converged,
        iterations=it,
    )


class LaplaceEvidence(torch.autograd.Function):
    r"""Laplace log evidence as a differentiable function of the prior
    covariance ``K``.

    Forward finds the mode (warm-started) and returns the ``batch_shape``
    evidence. Backward returns ``∂ log Z / ∂K = ½ (ααᵀ - R + αbᵀ + bαᵀ)`` with
    ``R = (K + Ŵ⁻¹)⁻¹ = Ŵ - Ŵ Σ Ŵ`` (``Σ = (K⁻¹ + Ŵ)⁻¹``) and
    ``b = (I + ŴK)⁻¹ s``, ``s_j = -½ ∂ log|I + KŴ| / ∂f̂_j``: the second pair of
    terms is the implicit dependence of the mode on ``K``.
    """

    @staticmethod
    def forward(ctx, K, comparisons, likelihood, init, options, out):  # noqa: D102
        L = jittered_cholesky(K.detach(), name="prior covariance K")
        state = find_mode(L, comparisons, likelihood, init, **options)
        out["state"] = state
        ctx.state = state
        ctx.comparisons = comparisons
        ctx.likelihood = likelihood
        return state.evidence.clone()

    @staticmethod
    def backward(ctx, grad_out):  # noqa: D102
        state: LaplaceState = ctx.state
        comps = ctx.comparisons.expand(state.mode.shape[:-1] + ctx.comparisons.shape[-2:])
        n = state.mode.shape[-1]
        _, _, omega, domega = ctx.likelihood.derivatives(state.mode, comps)
        W = comparison_laplacian(omega, comps, n)
        F = state.covariance_root()  # Σ = F Fᵀ
        G = W @ F  # Ŵ Σ Ŵ = G Gᵀ
        w_idx = comps[..., 0].unsqueeze(-1).expand(comps.shape[:-1] + (n,))
        l_idx = comps[..., 1].unsqueeze(-1).expand(comps.shape[:-1] + (n,))
        diff = F.gather(-2, w_idx) - F.gather(-2, l_idx)  # batch x m x n
        q = diff.pow(2).sum(-1)  # batch x m: a_kᵀ Σ a_k
        s = -0.5 * scatter_pairs(q * domega, comps, n)  # batch x n
        b = s - (G @ (F.transpose(-1, -2) @ s.unsqueeze(-1))).squeeze(-1)
        a = state.alpha
        R = W - G @ G.transpose(-1, -2)
        ab = a.unsqueeze(-1) * b.unsqueeze(-2)
        M = a.unsqueeze(-1) * a.unsqueeze(-2) - R + ab + ab.transpose(-1, -2)
        grad_K = 0.5 * grad_out[..., None, None] * M
        return grad_K, None, None, None, None, None


def laplace_evidence(
    K: Tensor,
    comparisons: Tensor,
    likelihood: PairwiseLikelihood,
    init: Tensor | None = None,
    **options,
) -> tuple[Tensor, LaplaceState]:
    r"""Laplace log evidence, differentiable in ``K``, and the state at the mode.

    Args:
        K: ``batch_shape x n x n`` prior covariance of the utilities at the
            designs (may require grad).
        comparisons: ``batch_shape x m x 2`` long ``[winner, loser]`` rows.
        likelihood: The pairwise likelihood.
        init: Optional ``batch_shape x n`` warm start.
        **options: Passed to :func:`find_mode`.

    Returns:
        ``(evidence, state)``: a ``batch_shape`` tensor and the
        :class:`LaplaceState`.
    """
    out: dict = {}
    evidence = LaplaceEvidence.apply(K, comparisons, likelihood, init, options, out)
    return evidence, out["state"]
