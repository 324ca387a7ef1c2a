r"""Warm starts of the Newton mode search from a previous mode or state.

A mode found under one prior covariance ``K_old`` seeds the search under a new
``K``: the start ``f0 = K ∇ℓ(init)`` is exact at a previous mode under the same
``K`` and well scaled under a new one, and in the precision form a previous
state with its covariance also gives the first-order prediction of the new
mode. :mod:`prefbo.inference.newton` keeps whichever candidate has the
higher ``Ψ`` (or ``f = 0``).
"""

from __future__ import annotations

from torch import Tensor

from prefbo.inference.gaussian import GaussianApproximation
from prefbo.inference.laplacian import pair_diff, scatter_pairs
from prefbo.likelihoods.pairwise import PairwiseLikelihood


def _mv(M: Tensor, x: Tensor) -> Tensor:
    r"""``M x`` for ``batch x n x n`` ``M`` and ``batch x n`` ``x``."""
    return (M @ x.unsqueeze(-1)).squeeze(-1)


def warm_candidates(
    init: Tensor,
    prev: GaussianApproximation | None,
    L: Tensor,
    comparisons: Tensor,
    likelihood: PairwiseLikelihood,
    Kinv: Tensor | None,
) -> list[tuple[Tensor, Tensor, Tensor]]:
    r"""Warm starts ``(f, p, pm)`` from ``init`` (or the state ``prev``).

    ``p`` are Newton's prior coordinates (``v = L⁻¹f`` whitened; ``f`` itself
    in the precision form) and ``pm`` the prior metric applied to them (``v``,
    or ``K⁻¹f``). The first candidate is ``f0 = K ∇ℓ(init)``, i.e.
    ``v0 = Lᵀ ∇ℓ(init)``: exact at a previous mode under the same ``K``, and
    always well scaled under a new ``K`` (unlike ``L⁻¹ init``). From a Laplace
    state ``∇ℓ(f̂) = K_old⁻¹ f̂ = α`` at its mode, so ``f0 = K α`` needs no
    likelihood pass (and ``K⁻¹ f0 = α`` needs no product). In the precision
    form a state with its covariance, over the same comparisons, also gives
    the first-order prediction of the new mode (:func:`implicit_prediction`).

    Args:
        init: ``batch_shape x n`` (or broadcastable) previous mode.
        prev: The previous state ``init`` came from, if any.
        L: ``batch_shape x n x n`` lower Cholesky factor of the new ``K``.
        comparisons: ``batch_shape x m x 2`` ``[winner, loser]`` rows.
        likelihood: The pairwise likelihood.
        Kinv: ``batch_shape x n x n`` ``K⁻¹`` in the precision form, ``None``
            in the whitened form.

    Returns:
        One or two ``(f, p, pm)`` triples of ``batch_shape x n`` tensors.
    """
    batch, n = L.shape[:-2], L.shape[-1]
    precision = Kinv is not None
    from_state = type(prev) is GaussianApproximation
    if from_state:
        g0 = prev.alpha.to(L).expand(batch + (n,))
    else:
        _, g0k, _, _ = likelihood.derivatives(
            init.to(L).expand(batch + (n,)), comparisons
        )
        g0 = scatter_pairs(g0k, comparisons, n)
    v0 = _mv(L.transpose(-1, -2), g0)
    f0 = _mv(L, v0)
    if not precision:
        p0, pm0 = v0, v0
    elif from_state:
        p0, pm0 = f0, g0  # K⁻¹ f0 = K⁻¹ K α = α (the new K)
    else:
        p0, pm0 = f0, _mv(Kinv, f0)
    candidates = [(f0, p0, pm0)]
    if (
        precision
        and prev is not None
        and prev._post_cov is not None
        and prev.curvature.shape[-1] == comparisons.shape[-2]
    ):
        f1 = implicit_prediction(prev, f0, from_state, L, comparisons)
        candidates.append((f1, f1, _mv(Kinv, f1)))
    return candidates


def implicit_prediction(
    prev: GaussianApproximation,
    f0: Tensor,
    from_state: bool,
    L: Tensor,
    comparisons: Tensor,
) -> Tensor:
    r"""First-order (implicit-function) prediction of the new mode from the
    previous state: ``f̂ + (I + K W)⁻¹ δK α = f̂ + r - Σ W r`` with
    ``r = K_new α_old - f̂_old`` (``= δK α_old``) and ``Σ``, ``W`` the old
    ones (in the new ``K``'s dtype and device, like every warm start).

    Args:
        prev: The previous state, with its posterior covariance ``Σ``.
        f0: ``batch_shape x n`` first warm start ``K_new α_old`` where it came
            from the state (``from_state``), else unused.
        from_state: Whether ``f0`` is ``K_new α_old``.
        L: ``batch_shape x n x n`` lower Cholesky factor of ``K_new``.
        comparisons: ``batch_shape x m x 2`` ``[winner, loser]`` rows, the
            previous state's.

    Returns:
        The ``batch_shape x n`` predicted mode.
    """
    batch, n = L.shape[:-2], L.shape[-1]
    fo = prev.mode.to(L).expand(batch + (n,))
    if from_state:
        r = f0 - fo
    else:
        Lt = L.transpose(-1, -2)
        r = _mv(L, _mv(Lt, prev.alpha.to(L).expand(batch + (n,)))) - fo
    Wr = scatter_pairs(prev.curvature.to(L) * pair_diff(r, comparisons), comparisons, n)
    return fo + r - _mv(prev._post_cov.to(L), Wr)
