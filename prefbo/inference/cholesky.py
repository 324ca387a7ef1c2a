r"""Cholesky factorisation with escalating, announced jitter, and solves with
the factor."""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from prefbo.exceptions import NumericalError, NumericalWarning


def jittered_cholesky(
    matrix: Tensor,
    *,
    name: str = "matrix",
    jitter: float | None = None,
    max_tries: int = 6,
) -> Tensor:
    r"""Lower Cholesky factor of a batch of symmetric PSD matrices.

    The plain factorisation is tried first. Batch elements where it fails get
    ``jitter · mean(diag)`` added to their diagonal, escalating tenfold up to
    ``max_tries`` times, and a :class:`~prefbo.exceptions.NumericalWarning`
    says how much was added. Non-finite input raises at once.

    Args:
        matrix: A ``batch_shape x n x n`` symmetric matrix.
        name: What the matrix is, for messages.
        jitter: The first relative jitter; default ``1e-8`` (float64) or
            ``1e-6`` (float32).
        max_tries: How many escalations to try.

    Returns:
        A ``batch_shape x n x n`` lower-triangular factor ``L`` with
        ``L Lᵀ = matrix + jitter·I``.
    """
    chol, info = torch.linalg.cholesky_ex(matrix)
    failed = info > 0
    if not bool(failed.any()):
        return chol
    if not bool(torch.isfinite(matrix).all()):
        raise NumericalError(
            f"{name} has non-finite entries; cannot factorise it. Check the "
            "kernel hyperparameters and inputs for NaN/inf."
        )
    if jitter is None:
        jitter = 1e-8 if matrix.dtype == torch.float64 else 1e-6
    scale = (
        matrix.diagonal(dim1=-2, dim2=-1)
        .mean(-1)
        .abs()
        .clamp_min(torch.finfo(matrix.dtype).tiny)
    )  # batch
    eye = torch.eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)
    for i in range(max_tries):
        level = jitter * 10**i
        jittered = matrix + (level * scale)[..., None, None] * eye
        new_chol, info = torch.linalg.cholesky_ex(jittered)
        chol = torch.where(failed[..., None, None], new_chol, chol)
        failed = failed & (info > 0)
        if not bool(failed.any()):
            warnings.warn(
                f"{name} was not numerically positive definite; added jitter "
                f"{level:.1e} x mean(diag) to its diagonal.",
                NumericalWarning,
                stacklevel=3,
            )
            return chol
    raise NumericalError(
        f"{name} is not positive definite even with jitter "
        f"{jitter * 10 ** (max_tries - 1):.1e} x mean(diag); check the inputs and "
        "kernel hyperparameters."
    )


def cholesky_solve(b: Tensor, chol: Tensor) -> Tensor:
    r"""``(L Lᵀ)⁻¹ b`` for a lower factor ``L``, by two triangular solves.

    Same result as ``torch.cholesky_solve(b, L)``, which on the CPU first
    copies ``L`` into a column-major clone, a copy that dominates for batches.

    Args:
        b: ``batch_shape x n x k`` right-hand sides.
        chol: ``batch_shape x n x n`` lower-triangular factor ``L``.

    Returns:
        ``batch_shape x n x k``.
    """
    y = torch.linalg.solve_triangular(chol, b, upper=False)
    return torch.linalg.solve_triangular(chol.mT, y, upper=True)


def row_major(S: Tensor) -> Tensor:
    r"""A symmetric matrix as a row-major view.

    LAPACK-backed results (``cholesky_inverse``) come column-major, and every
    flattening or ``reshape(...).clone()`` of those is a transposing copy;
    ``Sᵀ`` holds the same values in row-major order for free.

    Args:
        S: ``batch_shape x n x n`` symmetric.

    Returns:
        ``S`` or ``Sᵀ`` (the same values), row-major where either is.
    """
    return S.mT if not S.is_contiguous() and S.mT.is_contiguous() else S
