r"""The weighted comparison Laplacian ``W = Dᵀ diag(ω) D`` and its products.

``D`` is the ``m x n`` difference operator of the comparisons (row ``k`` is
``+1`` at comparison ``k``'s winner and ``-1`` at its loser), so ``W`` is the
Laplacian of the comparison graph weighted by ``ω``: symmetric, positive
semi-definite, ``W·1 = 0``, with ``n + 2m`` non-zeros at most. It is the
likelihood curvature of the Laplace approximation and the site precision of
EP. Small problems use a dense ``W``; from ``n ≥ DENSE_BELOW`` on the CPU, and
from ``DENSE_BELOW_ACCELERATOR`` elsewhere, the products use one block-diagonal
sparse CSR matrix over the batch. (On an H200 the dense products gave the
whitened Newton solve of 1,024 problems about two thirds of the sparse one's
device time at n = 200 and 94 % of its time at n = 800.) What depends on the
comparisons alone (entry positions, the CSR pattern) is cached per
comparisons tensor (:mod:`prefbo.inference.cache`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from prefbo.inference.cache import cached_for

DENSE_BELOW = 128  # dense W below, sparse CSR from here on (CPU)
DENSE_BELOW_ACCELERATOR = 1024  # the same on CUDA and other accelerators


def dense_below(device: torch.device) -> int:
    r"""The ``n`` from which ``W``'s products go sparse on ``device``."""
    return DENSE_BELOW if device.type == "cpu" else DENSE_BELOW_ACCELERATOR


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


def pair_diff(f: Tensor, comparisons: Tensor) -> Tensor:
    r"""``D f``: ``f_w - f_l`` per comparison.

    Args:
        f: ``batch_shape x n`` values at the designs.
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows.

    Returns:
        ``batch_shape x m``.
    """
    return f.gather(-1, comparisons[..., 0]) - f.gather(-1, comparisons[..., 1])


def comparison_laplacian(
    weights: Tensor, comparisons: Tensor, n: int, base: Tensor | None = None
) -> Tensor:
    r"""Dense weighted comparison Laplacian ``W = Dᵀ diag(weights) D``.

    Args:
        weights: ``batch_shape x m`` non-negative weights.
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows.
        n: number of designs.
        base: Optional ``batch_shape x n x n`` matrix to add ``W`` to (a new
            tensor is returned; ``base`` is not modified).

    Returns:
        ``batch_shape x n x n`` symmetric PSD matrix with ``W·1 = 0`` (plus
        ``base``).
    """
    return scatter_laplacian(weights, laplacian_index(comparisons, n), n, base)


def laplacian_index(comparisons: Tensor, n: int) -> Tensor:
    r"""Flat ``n x n`` positions of ``W``'s four entries per comparison
    (``ww, ll, wl, lw``), cached per comparisons tensor.

    Args:
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows.
        n: number of designs.

    Returns:
        ``batch_shape x 4m`` long.
    """

    def build() -> Tensor:
        w, l = comparisons[..., 0], comparisons[..., 1]
        return torch.cat([w * n + w, l * n + l, w * n + l, l * n + w], dim=-1)

    return cached_for(comparisons, ("index", n), build)


def scatter_laplacian(
    weights: Tensor, index: Tensor, n: int, base: Tensor | None = None
) -> Tensor:
    r"""``base + Dᵀ diag(weights) D`` (or ``W`` alone) with the positions
    ``index`` of :func:`laplacian_index`; ``batch_shape x n x n``."""
    batch = weights.shape[:-1]
    if base is None:
        out = weights.new_zeros(batch + (n * n,))
    else:
        out = base.expand(batch + (n, n)).reshape(batch + (n * n,)).clone()
    scatter_laplacian_(out, weights, index)
    return out.view(batch + (n, n))


def scatter_laplacian_(flat: Tensor, weights: Tensor, index: Tensor) -> None:
    r"""Add ``Dᵀ diag(weights) D`` in place to ``flat`` (``batch x n²``)."""
    flat.scatter_add_(-1, index, torch.cat([weights, weights, -weights, -weights], -1))


def cholesky_plus_laplacian(
    Kinv: Tensor, weights: Tensor, index: Tensor
) -> tuple[Tensor, Tensor]:
    r"""``cholesky_ex(K⁻¹ + W)`` for ``W = Dᵀ diag(weights) D`` without an n²
    copy: ``W``'s ``4m`` entries (positions ``index``, see
    :func:`laplacian_index`) are added to ``Kinv`` in place, the sum is
    factorised into a new tensor, and the entries are restored exactly.

    Args:
        Kinv: ``batch x n x n`` (row-major; copied once otherwise).
        weights: ``batch x m``.
        index: ``batch x 4m``.

    Returns:
        The lower factor and ``info`` of :func:`torch.linalg.cholesky_ex`.
    """
    Kinv = Kinv.contiguous()
    flat = Kinv.view(Kinv.shape[:-2] + (-1,))
    saved = flat.gather(-1, index)
    scatter_laplacian_(flat, weights, index)
    try:
        return torch.linalg.cholesky_ex(Kinv)
    finally:
        flat.scatter_(-1, index, saved)


def pair_quadratic(
    S: Tensor, comparisons: Tensor, index: Tensor | None = None
) -> Tensor:
    r"""``a_kᵀ S a_k = S_ww + S_ll - 2 S_wl`` for every comparison.

    Args:
        S: ``batch_shape x n x n`` symmetric matrix.
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows.
        index: Their :func:`laplacian_index` if the caller has it.

    Returns:
        ``batch_shape x m``.
    """
    n, m = S.shape[-1], comparisons.shape[-2]
    if index is None:
        index = laplacian_index(comparisons, n)
    # the positions ww, ll, wl, lw of W's entries are the ones read
    ww_ll_wl = S.flatten(-2).gather(-1, index[..., : 3 * m])
    return ww_ll_wl[..., :m] + ww_ll_wl[..., m : 2 * m] - 2 * ww_ll_wl[..., 2 * m :]


@dataclass(eq=False)
class _CSRPattern:
    r"""The sparsity pattern of ``W = Dᵀ diag(ω) D`` for one set of comparisons:
    it depends on the comparisons alone, so it is built once and reused while
    only the weights change.
    """

    order: Tensor  # the 4m entries [ww, ll, wl, lw] per batch row, sorted
    counts: Tensor  # entries summed into each stored non-zero
    crow: Tensor
    col: Tensor
    size: int


def _csr_pattern(comparisons: Tensor, n: int, batch: torch.Size) -> _CSRPattern:
    r"""The (cached) CSR pattern of :func:`_laplacian_csr` for comparisons
    broadcast to ``batch x m x 2``."""

    def build() -> _CSRPattern:
        m = comparisons.shape[-2]
        B = math.prod(batch)
        comps = comparisons.expand(batch + (m, 2)).reshape(B, m, 2)
        device = comps.device
        offset = (torch.arange(B, device=device) * n).unsqueeze(-1)  # B x 1
        w = comps[..., 0] + offset
        l = comps[..., 1] + offset
        size = B * n
        rows = torch.cat([w, l, w, l], -1).flatten()
        cols = torch.cat([w, l, l, w], -1).flatten()
        # entries sorted by (row, column), duplicates summed segment by
        # segment: no atomic adds, so the sums are reproducible on
        # accelerators too
        sorted_keys, order = torch.sort(rows * size + cols, stable=True)
        keys, counts = torch.unique_consecutive(sorted_keys, return_counts=True)
        crow = torch.zeros(size + 1, dtype=torch.long, device=device)
        crow[1:] = torch.bincount(keys // size, minlength=size).cumsum(0)
        return _CSRPattern(order, counts, crow, keys % size, size)

    return cached_for(comparisons, ("csr", n, tuple(batch)), build)


def _laplacian_csr(weights: Tensor, comparisons: Tensor, n: int) -> Tensor:
    r"""``W = Dᵀ diag(weights) D`` as one block-diagonal sparse CSR matrix over
    the batch (``B·n x B·n``, ``B`` = the broadcast batch size).

    Built directly in CSR order: the ``4m`` entries per batch element are
    sorted once by ``(row, column)`` and duplicates (a design's diagonal, a
    repeated pair) summed per segment, with no COO ``coalesce``. The sort
    depends on the comparisons alone and is cached (:func:`_csr_pattern`);
    only the values are computed per call.
    """
    batch = torch.broadcast_shapes(weights.shape[:-1], comparisons.shape[:-2])
    m = weights.shape[-1]
    B = math.prod(batch)
    pattern = _csr_pattern(comparisons, n, batch)
    om = weights.expand(batch + (m,)).reshape(B, m)
    entries = torch.cat([om, om, -om, -om], -1).flatten()[pattern.order]
    if entries.numel():
        values = torch.segment_reduce(entries, "sum", lengths=pattern.counts)
    else:  # no comparisons: W = 0 (segment_reduce rejects empty input)
        values = entries
    size = pattern.size
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(pattern.crow, pattern.col, values, (size, size))


def _laplacian_csr_for(
    weights: Tensor, comparisons: Tensor, n: int, rhs_batch: torch.Size
) -> tuple[Tensor, torch.Size]:
    r"""The CSR ``W`` of :func:`_laplacian_csr` for products with right-hand
    sides of batch ``rhs_batch``, and the batch of those products: one block
    per element of the broadcast batch of weights, comparisons and ``M``."""
    batch = torch.broadcast_shapes(
        weights.shape[:-1], comparisons.shape[:-2], rhs_batch
    )
    weights = weights.expand(batch + weights.shape[-1:])
    comparisons = comparisons.expand(batch + comparisons.shape[-2:])
    return _laplacian_csr(weights, comparisons, n), batch


def _csr_matmul(W: Tensor, M: Tensor, batch: torch.Size) -> Tensor:
    r"""``W @ M`` for a block-diagonal CSR ``W`` from :func:`_laplacian_csr`
    and a ``batch x n x k`` dense ``M`` (made row-major first)."""
    n, k = M.shape[-2:]
    rhs = M.expand(batch + (n, k)).reshape(-1, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return (W @ rhs.contiguous()).reshape(batch + (n, k))


def laplacian_matmul(
    weights: Tensor, comparisons: Tensor, M: Tensor, dense: Tensor | None = None
) -> Tensor:
    r"""``W @ M`` for ``W = Dᵀ diag(weights) D``.

    Small problems use a dense ``W``; from ``n ≥`` :func:`dense_below` on, ``W``
    (``n + 2m`` non-zeros) is assembled as a block-diagonal sparse CSR matrix
    over the batch instead of a dense ``n³`` product.

    Args:
        weights: ``batch_shape x m``.
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows.
        M: ``batch_shape x n x k``.
        dense: The dense ``W`` if the caller already built it (used below the
            sparse threshold instead of building it again).

    Returns:
        ``batch_shape x n x k``.
    """
    n = M.shape[-2]
    if n >= dense_below(M.device):
        W, batch = _laplacian_csr_for(weights, comparisons, n, M.shape[:-2])
        return _csr_matmul(W, M, batch)
    if dense is None:  # W's batch: the weights' and comparisons' (M broadcasts)
        wbatch = torch.broadcast_shapes(weights.shape[:-1], comparisons.shape[:-2])
        dense = comparison_laplacian(
            weights.expand(wbatch + weights.shape[-1:]),
            comparisons.expand(wbatch + comparisons.shape[-2:]),
            n,
        )
    return dense @ M


def laplacian_sandwich(
    weights: Tensor, comparisons: Tensor, S: Tensor
) -> tuple[Tensor, Tensor]:
    r"""``W S`` and ``W S W`` for a symmetric ``S``, with one ``W`` for both
    products (dense below :func:`dense_below`, sparse CSR from there on).

    Args:
        weights: ``batch_shape x m``.
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows.
        S: ``batch_shape x n x n`` symmetric.

    Returns:
        ``(W S, W S W)``, each ``batch_shape x n x n``.
    """
    n = S.shape[-1]
    if n < dense_below(S.device):
        W = comparison_laplacian(weights, comparisons, n)
        WS = W @ S  # W Σ
        WSW = W @ WS.transpose(-1, -2)  # W Σ W
    else:
        W, batch = _laplacian_csr_for(weights, comparisons, n, S.shape[:-2])
        WS = _csr_matmul(W, S, batch)
        WSW = _csr_matmul(W, WS.transpose(-1, -2), batch)
    return WS, WSW
