r"""Batched Laplace approximation for pairwise preference GPs: the mode.

:func:`find_mode` checks its inputs, picks the form of the Newton system
(``"whitened"`` ``I + Lᵀ W L`` or ``"precision"`` ``K⁻¹ + W``) and runs the
damped Newton search of :mod:`prefbo.inference.newton` in it, falling back to
the whitened form where the precision form gives up.

The result is a :class:`~prefbo.inference.GaussianApproximation`; its
evidence, differentiable in ``K``, is in :mod:`prefbo.inference.evidence`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError
from prefbo.inference.gaussian import GaussianApproximation
from prefbo.inference.newton import REFINE_STEPS as REFINE_STEPS
from prefbo.inference.newton import newton_mode
from prefbo.likelihoods.pairwise import PairwiseLikelihood
from prefbo.utils.checks import check_same_device

FORMS = ("auto", "whitened", "precision")


def default_tol(dtype: torch.dtype) -> float:
    r"""Default step tolerance of Newton and EP: ``1e-9`` (float64) or ``1e-4``."""
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
    form: str = "auto",
) -> GaussianApproximation:
    r"""Find the Laplace mode of a batch of pairwise-probit/logit problems.

    Two symmetric forms of the Newton system are available:

    - ``"whitened"``: ``A = I + Lᵀ W L`` in ``v = L⁻¹ f`` (eigenvalues ``≥ 1``;
      stable in float32 and for any conditioning of ``K``); one ``n³`` product
      per iteration.
    - ``"precision"``: ``B = K⁻¹ + W`` with ``K⁻¹`` formed once from ``L``;
      only a Cholesky per iteration. The explicit ``K⁻¹`` loses digits as
      ``cond(K)`` grows, so it enters ``B`` only, the preconditioner: each
      step is ``B⁻¹ ∇Ψ`` with the true gradient ``∇ℓ(f) - K⁻¹f`` (``K⁻¹f`` by
      the backward-stable solve with ``L``), and a last check refines the end
      point the same way (with ``B`` factorised again if that moves it).
      Steps ``B⁻¹(Wf + ∇ℓ)`` with ``K⁻¹`` inside would stop short of the
      mode when ``K`` is ill conditioned. Used in float64 unless ``K`` is
      near-singular (the ratio of the extreme diagonal entries of ``L``, a
      lower bound on ``cond(L)``, above ``1e6``).

    ``"auto"`` (default) takes ``"precision"`` in float64 when the check
    passes and ``"whitened"`` otherwise; ``"precision"`` also falls back to
    ``"whitened"`` if its Newton system fails to factorise.

    Where the curvature is stiff (``ω_k (K_ww + K_ll)`` beyond
    :data:`~prefbo.inference.stiff.STIFF_LIMIT`, e.g. a probit at a tiny
    ``noise_std``) neither system is formed: the whitened form steps with
    ``P = I - A⁻¹`` from :mod:`prefbo.inference.stiff`, stops on the Newton
    decrement alone, and the approximation holds ``P`` (variances between 0
    and the prior to working precision, converging as the noise vanishes).

    Args:
        chol_prior: ``batch_shape x n x n`` lower Cholesky factor of the prior
            covariance ``K``.
        comparisons: ``batch_shape x m x 2`` long ``[winner, loser]`` rows.
        likelihood: The pairwise likelihood.
        init: Optional ``batch_shape x n`` warm start (e.g. the last mode), or
            a previous :class:`GaussianApproximation`.
        max_iter: Newton iteration budget.
        tol: Stop when every batch element's Newton step has
            ``max|Δf| ≤ tol · (1 + max|f|)``; default ``1e-9`` (float64) or
            ``1e-4`` (float32).
        num_halvings: Step sizes ``1, ½, …, 2^-num_halvings`` are tried at
            once; the largest that does not decrease ``Ψ`` is taken.
        sync_every: Read the on-device convergence flags every this many
            iterations (default 1 on CPU, where it is free, 4 on CUDA).
        form: ``"auto"``, ``"whitened"`` or ``"precision"``.

    Returns:
        The :class:`GaussianApproximation` at the mode (detached from autograd).

    Raises:
        InputDataError: An unknown ``form``, or ``comparisons`` not on
            ``chol_prior``'s device.
    """
    check_form_and_device(form, comparisons, chol_prior)
    with torch.no_grad():
        if form == "auto":
            form = auto_form(chol_prior)
        if tol is None:
            tol = default_tol(chol_prior.dtype)
        args = (
            chol_prior,
            comparisons,
            likelihood,
            init,
            max_iter,
            tol,
            num_halvings,
            sync_every,
        )
        if form == "precision":
            state = newton_mode(*args, precision=True)
            if state is not None:
                return state
        return newton_mode(*args, precision=False)


def check_form_and_device(form: str, comparisons: Tensor, chol_prior: Tensor) -> None:
    r"""The mode finders' shared checks: a known ``form``, and ``comparisons``
    on ``chol_prior``'s device.

    Raises:
        InputDataError: Naming ``form`` or ``comparisons``.
    """
    if form not in FORMS:
        raise InputDataError(f"form must be one of {FORMS}; got {form!r}.")
    check_same_device("comparisons", comparisons, "chol_prior", chol_prior)


def auto_form(chol_prior: Tensor) -> str:
    r"""``"precision"`` in float64 unless ``K`` is near-singular, else
    ``"whitened"``."""
    if chol_prior.dtype == torch.float64:
        d = chol_prior.diagonal(dim1=-2, dim2=-1).abs()
        ratio = d.amax(-1) / d.amin(-1).clamp_min(1e-300)
        if bool((ratio <= 1e6).all()):
            return "precision"
    return "whitened"
