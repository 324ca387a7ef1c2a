r"""EUBO over every pair of a finite pool of designs.

Where a study's designs are a finite pool (items described by features, or
a finite :class:`~prefbo.space.Space` enumerated by its grid), the question
that maximises analytic EUBO (Lin et al., 2022; see
:mod:`prefbo.acquisition.eubo`) can be found exactly, by scoring every
unordered pair ``{a, b}``, ``a ≠ b``, of the ``N`` designs:
``N (N - 1) / 2`` values from the joint posterior ``(μ, Σ)`` of the pool,

    EUBO(a, b) = σ (φ(u) + u Φ(u)) + μ_b,   u = (μ_a - μ_b) / σ,
    σ² = Σ_aa + Σ_bb - 2 Σ_ab.

The pool is taken in blocks of ``block_size`` designs: for each pair of
blocks ``(I, J)``, ``I ≤ J``, one joint posterior of the ``≤ 2 block_size``
designs of ``I ∪ J`` gives the values of all pairs across them, so memory
stays at ``O(block_size²)`` whatever ``N`` (``N = 1000`` fits one block:
499,500 pairs from one ``1000 x 1000`` posterior covariance).

Pairs of identical designs (equal rows) are never proposed, nor any pair
listed in ``exclude`` (e.g. questions the model has already resolved), nor,
given ``min_information``, a pair whose answer carries less information
about the utility (pairwise BALD under the model's likelihood, Houlsby et
al., 2011; :class:`~prefbo.acquisition.PairwiseBALD`). That information is
computed only for the pairs of each block whose EUBO beats the best found so
far, best first, until one carries enough.
"""

from __future__ import annotations

import torch
from botorch.models.model import Model
from torch import Tensor

from prefbo.acquisition.bald import PairwiseBALD
from prefbo.acquisition.pair_moments import eubo_from_moments, pair_moments
from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.models.prediction import check_finite_points
from prefbo.utils.checks import check_int, check_nonneg_float, describe

#: Designs per block of :func:`best_pool_pair` (two blocks' joint posterior:
#: a ``2048 x 2048`` covariance, 32 MB in float64).
BLOCK_SIZE = 1024
# pairs whose information is computed at once (best EUBO first) under
# ``min_information``: 4096 pairs x 257 quadrature nodes, 8 MB in float64
INFORMATION_CHUNK = 4096


def _check_pool(X: object) -> Tensor:
    if not isinstance(X, Tensor) or not X.is_floating_point():
        raise InputTypeError(f"X must be a real N x d tensor; got {describe(X)}.")
    if X.ndim != 2 or X.shape[0] < 2:
        raise InputDataError(
            f"X must be N x d with N >= 2 designs; got shape {tuple(X.shape)}."
        )
    check_finite_points(X, "X")
    return X


def _check_exclude(exclude: object, n: int, device: torch.device) -> Tensor | None:
    if exclude is None:
        return None
    if not isinstance(exclude, Tensor) or exclude.dtype not in (
        torch.int32,
        torch.int64,
    ):
        raise InputTypeError(
            f"exclude must be None or a k x 2 integer tensor of design indices; got "
            f"{describe(exclude)}."
        )
    if exclude.ndim != 2 or exclude.shape[-1] != 2:
        raise InputDataError(
            f"exclude must be k x 2 (pairs of design indices); got shape "
            f"{tuple(exclude.shape)}."
        )
    if exclude.numel() and not bool(((exclude >= 0) & (exclude < n)).all()):
        raise InputDataError(f"exclude must hold design indices in [0, {n - 1}].")
    return exclude.to(device=device, dtype=torch.long)


def best_pool_pair(
    model: Model,
    X: Tensor,
    exclude: Tensor | None = None,
    block_size: int = BLOCK_SIZE,
    min_information: float | None = None,
) -> tuple[Tensor, Tensor]:
    r"""The pair of pool designs with the highest analytic EUBO.

    Args:
        model: A one-output preference model in eval mode (any model with a
            posterior; prefbo's pairwise GPs take the fast path of
            :func:`~prefbo.acquisition.pair_moments.pair_moments`).
        X: ``N x d`` designs of the pool (in the model's inputs), ``N ≥ 2``.
        exclude: Optional ``k x 2`` long tensor of index pairs never to
            propose (either order).
        block_size: Designs per block (an int ``≥ 1``).
        min_information: Optional least information, in nats, a pair's answer
            must carry (:class:`~prefbo.acquisition.PairwiseBALD`; the model
            needs a pairwise answer likelihood).

    Returns:
        ``(indices, value)``: a long tensor ``[a, b]`` (``a < b``) and its
        EUBO (a 0-d tensor).

    Raises:
        InputTypeError: ``X``, ``exclude``, ``block_size`` or
            ``min_information`` of the wrong type.
        InputDataError: ``X`` not ``N x d`` with ``N ≥ 2`` or not finite,
            ``exclude`` out of range, a negative ``min_information``, or no
            pair left to propose (every pair excluded, of identical designs
            or carrying less than ``min_information``).
    """
    X = _check_pool(X)
    block_size = check_int("block_size", block_size, 1)
    bald = None
    if min_information is not None:
        min_information = check_nonneg_float("min_information", min_information)
        bald = PairwiseBALD(model)
    n = X.shape[0]
    exclude = _check_exclude(exclude, n, X.device)
    banned = None
    if exclude is not None and exclude.numel():
        lo, hi = exclude.amin(-1), exclude.amax(-1)
        banned = torch.unique(lo * n + hi)
    moments = pair_moments(model)
    best_value = torch.tensor(-torch.inf, dtype=X.dtype, device=X.device)
    best = None
    starts = list(range(0, n, block_size))
    with torch.no_grad():
        for bi, i0 in enumerate(starts):
            I = torch.arange(i0, min(i0 + block_size, n), device=X.device)
            for j0 in starts[bi:]:
                J = torch.arange(j0, min(j0 + block_size, n), device=X.device)
                idx = I if j0 == i0 else torch.cat([I, J])
                mean, cov = moments.joint(X[idx])
                mean, cov = mean.reshape(-1), cov.reshape(len(idx), len(idx))
                a = torch.arange(len(I), device=X.device)
                b = a if j0 == i0 else torch.arange(len(I), len(idx), device=X.device)
                diag = cov.diagonal()
                var = diag[a, None] + diag[None, b] - 2 * cov[a[:, None], b[None, :]]
                values = eubo_from_moments(
                    mean[a, None] - mean[None, b], mean[None, b].expand_as(var), var
                )
                ga, gb = idx[a][:, None], idx[b][None, :]
                same = (X[idx[a]][:, None, :] == X[idx[b]][None, :, :]).all(-1)
                valid = (ga < gb) & ~same
                if banned is not None:
                    valid &= ~torch.isin(ga * n + gb, banned)
                values = torch.where(valid, values, -torch.inf)
                if bald is None:
                    k = int(torch.argmax(values))
                else:
                    delta = mean[a, None] - mean[None, b]
                    k = _first_informative(
                        values, delta, var, bald, min_information, best_value
                    )
                if k is not None and bool(values.reshape(-1)[k] > best_value):
                    best_value = values.reshape(-1)[k]
                    r, c = divmod(k, values.shape[1])
                    best = torch.stack([ga[r, 0], gb[0, c]])
    if best is None:
        enough = "" if bald is None else f", or carries under {min_information} nats"
        raise InputDataError(
            "no pair of the pool is left to propose: every pair is excluded, of "
            f"identical designs{enough}."
        )
    return best, best_value


def _first_informative(
    values: Tensor,
    delta: Tensor,
    var: Tensor,
    bald: PairwiseBALD,
    min_information: float,
    best_value: Tensor,
) -> int | None:
    r"""The flat index of the block's pair of highest EUBO above
    ``best_value`` whose answer carries at least ``min_information`` nats,
    or ``None``.

    Args:
        values: ``a x b`` EUBO values (``-inf`` where not proposed).
        delta: ``a x b`` differences of posterior means.
        var: ``a x b`` variances of the differences.
        bald: The model's :class:`~prefbo.acquisition.PairwiseBALD`.
        min_information: Nats.
        best_value: The best value found in earlier blocks.
    """
    flat = values.reshape(-1)  # a b
    order = flat.argsort(descending=True)
    for chunk in order.split(INFORMATION_CHUNK):
        live = flat[chunk] > best_value
        if not bool(live.any()):
            return None
        chunk = chunk[live]
        info = bald.information(delta.reshape(-1)[chunk], var.reshape(-1)[chunk])
        enough = (info >= min_information).nonzero()
        if enough.numel():
            return int(chunk[int(enough[0])])
    return None
