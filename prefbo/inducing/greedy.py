r"""Greedy MAP inference of a DPP by incremental (pivoted) Cholesky updates.

The DPP has the L-ensemble ``L = diag(q) K diag(q)`` over the ``n`` candidate
inputs, with ``K`` the kernel matrix and ``q ≥ 0`` per-candidate qualities.
Greedily maximising ``log det L_Z`` adds, at each step, the candidate

    ``z = argmax_j q_j² · var(x_j | chosen)``,

where ``var(x_j | chosen) = k(x_j, x_j) - k_jZ K_ZZ⁻¹ k_Zj`` is the noise-free
conditional (residual) variance. With ``q ≡ 1`` this is greedy conditional
variance reduction (CVR, Burt et al. 2020), the same greedy as BoTorch's
``GreedyVarianceReduction`` (Chen et al. 2018's fast greedy MAP).

The residual variances are updated incrementally as in a pivoted Cholesky
factorisation: after choosing ``x_j`` with residual ``d_j``, the new row of the
(transposed) Cholesky factor is

    ``e = (k(X, x_j) - C[:k, j]ᵀ C[:k, :]) / √d_j``,   ``d ← d - e²``,

so one kernel row ``k(X, x_j)`` is evaluated per step and only the ``m x n``
factor ``C`` is stored: ``O(n·m)`` memory and ``O(n·m²)`` time, never the
``n x n`` kernel matrix. All leading batch dimensions are handled by tensor
operations; the only Python loop is over the ``m`` greedy steps, and it does
not synchronise with the device.
"""

from __future__ import annotations

import math

import torch
from gpytorch.kernels import Kernel
from gpytorch.settings import variational_cholesky_jitter
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.utils.checks import check_float, check_int
from prefbo.utils.threads import limited


def default_tolerance(dtype: torch.dtype) -> float:
    r"""Default relative residual-variance tolerance of :func:`greedy_dpp_map`.

    It is GPyTorch's variational Cholesky jitter for ``dtype`` (``1e-6`` in
    float64, which is also BoTorch's ``_pivoted_cholesky_init`` epsilon, and
    ``1e-4`` in float32): a candidate whose residual variance is below the
    jitter that a ``VariationalStrategy`` adds to ``K_ZZ`` contributes nothing
    to it.

    Args:
        dtype: The floating dtype of the inputs.

    Returns:
        The relative tolerance.
    """
    return float(variational_cholesky_jitter.value(dtype))


def check_tol(tol: object) -> float | None:
    r"""Check a relative tolerance: ``None`` (the default) or a float in ``[0, 1)``.

    Returns:
        ``None`` or ``tol`` as a Python ``float``.
    """
    return check_float(
        "tol", tol, minimum=0, maximum=1, open_maximum=True, allow_none=True
    )


def check_kernel(covar_module: Kernel) -> None:
    r"""Check that ``covar_module`` is a GPyTorch ``Kernel``.

    Raises:
        InputTypeError: It is not.
    """
    if not isinstance(covar_module, Kernel):
        raise InputTypeError(
            "covar_module must be a GPyTorch Kernel; got "
            f"{type(covar_module).__name__}."
        )


def validate_inputs(inputs: Tensor, num_inducing: int) -> None:
    r"""Check ``inputs`` (``batch_shape x n x d``) and ``num_inducing`` (in ``[1, n]``).

    Raises:
        InputTypeError: ``inputs`` is not a floating tensor or ``num_inducing``
            not an integer.
        InputDataError: wrong shape, non-finite values or ``num_inducing``
            outside ``[1, n]``.
    """
    if not isinstance(inputs, Tensor) or not inputs.is_floating_point():
        raise InputTypeError(
            "inputs must be a floating-point batch_shape x n x d tensor; got "
            f"{type(inputs).__name__}"
            + (f" of dtype {inputs.dtype}." if isinstance(inputs, Tensor) else ".")
        )
    if inputs.ndim < 2 or inputs.shape[-2] == 0 or inputs.shape[-1] == 0:
        raise InputDataError(
            "inputs must have shape batch_shape x n x d with n, d >= 1; got "
            f"shape {tuple(inputs.shape)}."
        )
    check_int("num_inducing", num_inducing)
    n = inputs.shape[-2]
    if not 1 <= num_inducing <= n:
        raise InputDataError(
            f"num_inducing must be in [1, n] with n={n} the number of inputs; got "
            f"num_inducing={num_inducing}. Pass at most n inducing points."
        )
    if not bool(torch.isfinite(inputs).all()):
        raise InputDataError("inputs must be finite; got NaN or infinite entries.")


def _num_task_dims(covar_module: Kernel, batch_shape: torch.Size) -> int:
    r"""Kernel batch dimensions beyond the inputs' (e.g. one per output)."""
    kernel_batch = getattr(covar_module, "batch_shape", torch.Size())
    return max(len(kernel_batch) - len(batch_shape), 0)


def kernel_diagonal(covar_module: Kernel, inputs: Tensor) -> Tensor:
    r"""Prior variances ``k(x_j, x_j)`` of all inputs.

    A kernel with more batch dimensions than the inputs (e.g. the
    ``batch_shape x num_outputs`` kernel of a multi-output
    ``SingleTaskVariationalGP``) is evaluated for its first extra-batch element,
    as BoTorch does in its multi-task case.

    Args:
        covar_module: A GPyTorch kernel.
        inputs: A ``batch_shape x n x d`` tensor.

    Returns:
        A ``batch_shape x n`` tensor.
    """
    batch_shape, extra = (
        inputs.shape[:-2],
        _num_task_dims(covar_module, inputs.shape[:-2]),
    )
    X = inputs.view(batch_shape + (1,) * extra + inputs.shape[-2:])
    diag = covar_module(X, diag=True)  # batch x (tasks) x n
    diag = diag[(...,) + (0,) * extra + (slice(None),)]  # batch x n
    return diag.expand(batch_shape + inputs.shape[-2:-1])


def kernel_row(covar_module: Kernel, inputs: Tensor, x: Tensor) -> Tensor:
    r"""Cross-covariances ``k(X, x)`` of all inputs with one point per batch.

    Args:
        covar_module: A GPyTorch kernel.
        inputs: A ``batch_shape x n x d`` tensor.
        x: A ``batch_shape x 1 x d`` tensor.

    Returns:
        A ``batch_shape x n`` tensor.
    """
    batch_shape, extra = (
        inputs.shape[:-2],
        _num_task_dims(covar_module, inputs.shape[:-2]),
    )
    X = inputs.view(batch_shape + (1,) * extra + inputs.shape[-2:])
    x = x.view(batch_shape + (1,) * extra + x.shape[-2:])
    row = covar_module(x, X).to_dense()  # batch x (tasks) x 1 x n
    row = row[(...,) + (0,) * extra + (0, slice(None))]  # batch x n
    return row.expand(batch_shape + inputs.shape[-2:-1])


@torch.no_grad()
def greedy_dpp_map(
    inputs: Tensor,
    covar_module: Kernel,
    num_inducing: int,
    quality: Tensor | None = None,
    tol: float | None = None,
) -> tuple[Tensor, Tensor]:
    r"""Greedy MAP of the DPP ``L = diag(q) K diag(q)`` over ``inputs``.

    At step ``k`` the candidate maximising ``q_j² · d_j`` among the not yet
    chosen candidates with residual variance ``d_j > tol · max_i K_ii`` is
    chosen; ties go to the lowest index (so with ``quality=None`` the selection
    is exactly BoTorch's ``GreedyVarianceReduction``'s). Residual variances are
    clamped at zero (round-off can make them slightly negative in float32).

    A batch element runs out when no candidate has residual variance above the
    tolerance: then its remaining rank is (numerically) spent and any further
    point would be redundant. Its remaining slots are filled with padding: the
    lowest-index candidates not yet chosen, without updating the factor.
    ``num_selected`` tells how many leading indices of each batch element are
    genuine greedy choices.

    Args:
        inputs: A ``batch_shape x n x d`` tensor of candidates.
        covar_module: The GPyTorch kernel ``K``. It is evaluated one row
            ``k(X, x_j)`` at a time, plus its diagonal, under ``no_grad``.
        num_inducing: Number ``m ≤ n`` of points to choose.
        quality: Optional ``batch_shape x n`` non-negative qualities ``q``;
            ``None`` means ``q ≡ 1`` (CVR). Only their ratios matter.
        tol: Relative residual-variance tolerance; default
            :func:`default_tolerance` of the dtype.

    Returns:
        A tuple ``(indices, num_selected)``: ``batch_shape x m`` long indices
        into ``inputs`` (distinct within each batch element, in selection
        order) and the ``batch_shape`` long count of genuine choices.

    Raises:
        InputDataError: bad shapes or values of ``inputs``, ``num_inducing``
            (outside ``[1, n]``), ``quality`` or ``tol``.
        InputTypeError: ``inputs`` not floating, ``num_inducing`` not an int,
            ``covar_module`` not a GPyTorch ``Kernel`` or ``tol`` not a number.
    """
    validate_inputs(inputs, num_inducing)
    check_kernel(covar_module)
    tol = check_tol(tol)
    batch_shape, n = inputs.shape[:-2], inputs.shape[-2]
    if quality is not None and (
        not isinstance(quality, Tensor) or quality.shape != batch_shape + (n,)
    ):
        got = tuple(quality.shape) if isinstance(quality, Tensor) else type(quality)
        raise InputDataError(
            f"quality must be a batch_shape x n tensor of shape "
            f"{tuple(batch_shape + (n,))} matching inputs; got {got}."
        )
    if quality is not None and not bool(
        (torch.isfinite(quality) & (quality >= 0)).all()
    ):
        raise InputDataError(
            "quality must be finite and >= 0; got values in "
            f"[{quality.min().item():g}, {quality.max().item():g}] (NaN/inf?)."
        )
    with limited(inputs.shape[:-1].numel()):
        return _greedy(inputs, covar_module, num_inducing, quality, tol)


def _greedy(
    inputs: Tensor,
    covar_module: Kernel,
    num_inducing: int,
    quality: Tensor | None,
    tol: float | None,
) -> tuple[Tensor, Tensor]:
    r""":func:`greedy_dpp_map` on checked arguments."""
    batch_shape, (n, d) = inputs.shape[:-2], inputs.shape[-2:]
    m = num_inducing
    b = math.prod(batch_shape)
    tol = default_tolerance(inputs.dtype) if tol is None else tol
    resid = kernel_diagonal(covar_module, inputs).reshape(b, n).clamp_min(0)  # b x n
    threshold = tol * resid.amax(-1, keepdim=True)  # b x 1
    weight = None if quality is None else quality.reshape(b, n).square()
    flat_inputs = inputs.reshape(b, n, d)
    chol = inputs.new_zeros(b, m, n)  # rows of the transposed Cholesky factor
    indices = torch.zeros(b, m, dtype=torch.long, device=inputs.device)
    active = torch.zeros(b, m, dtype=torch.bool, device=inputs.device)
    available = torch.ones(b, n, dtype=torch.bool, device=inputs.device)
    neg_inf = torch.tensor(float("-inf"), dtype=inputs.dtype, device=inputs.device)
    for k in range(m):
        score = resid if weight is None else resid * weight  # b x n
        eligible = available & (resid > threshold)
        best, j = torch.where(eligible, score, neg_inf).max(-1)  # b, b
        is_active = best > neg_inf  # b
        pad = available.to(torch.uint8).argmax(-1)  # lowest unchosen index
        j = torch.where(is_active, j, pad)  # b
        indices[:, k] = j
        active[:, k] = is_active
        available.scatter_(-1, j.unsqueeze(-1), False)
        if k == m - 1:
            break
        x = flat_inputs.gather(-2, j.view(b, 1, 1).expand(b, 1, d))  # b x 1 x d
        row = kernel_row(covar_module, inputs, x.view(batch_shape + (1, d)))
        row = row.reshape(b, n)  # b x n
        if k > 0:
            c_j = chol[:, :k].gather(-1, j.view(b, 1, 1).expand(b, k, 1))  # b x k x 1
            row = row - (c_j.transpose(-1, -2) @ chol[:, :k]).squeeze(-2)  # b x n
        d_j = resid.gather(-1, j.unsqueeze(-1))  # b x 1
        e = torch.where(is_active.unsqueeze(-1), row / d_j.sqrt(), 0.0)  # b x n
        chol[:, k] = e
        resid = (resid - e * e).clamp_min(0)
    return (
        indices.view(batch_shape + (m,)),
        active.sum(-1).view(batch_shape),
    )
