r"""Validation of a pairwise preference GP's training data.

Designs and comparisons are checked by :mod:`prefbo.data.validation`; here
are the parts particular to the models: the padding masks of ragged batched
data (see :func:`~prefbo.models.batch_users`) and the ``strict`` replacement
of data.
"""

from __future__ import annotations

import torch
from torch import Tensor

from prefbo.data.validation import validate_pairwise_data
from prefbo.exceptions import InputDataError


def check_mask(
    data: Tensor, mask: object, name: str, shape: torch.Size
) -> tuple[Tensor, Tensor]:
    r"""Validate a padding mask against ``data``'s leading shape.

    Args:
        data: The data the mask belongs to.
        mask: A bool tensor broadcasting to ``shape``.
        name: The mask's argument name, for messages.
        shape: ``batch_shape x rows`` of ``data``.

    Returns:
        ``data`` and the mask on its device.
    """
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise InputDataError(
            f"{name} must be a bool tensor; got {type(mask).__name__}"
            + (f" of dtype {mask.dtype}." if isinstance(mask, Tensor) else ".")
        )
    try:
        torch.broadcast_shapes(mask.shape, shape)
    except RuntimeError:
        raise InputDataError(
            f"{name} must have shape {tuple(shape)} (batch_shape x rows); got "
            f"{tuple(mask.shape)}."
        ) from None
    return data, mask.to(data.device)


def validate_masked_data(
    datapoints: object,
    comparisons: object,
    design_mask: Tensor | None,
    comparison_mask: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    r"""Validate designs, comparisons and their optional padding masks.

    Padding comparisons become ``[0, 0]`` rows (they add a constant to the
    log likelihood, which the models take out of the evidence).

    Args:
        datapoints: ``batch_shape x n x d`` designs.
        comparisons: ``batch_shape x m x 2`` ``[winner, loser]`` indices.
        design_mask: Optional ``batch_shape x n`` bool (False: padding).
        comparison_mask: Optional ``batch_shape x m`` bool (False: padding).

    Returns:
        ``(datapoints, comparisons, design_mask, comparison_mask)``, the masks
        expanded to the data's batch shape.
    """
    if comparison_mask is not None and isinstance(comparisons, Tensor):
        comparisons, comparison_mask = check_mask(
            comparisons, comparison_mask, "comparison_mask", comparisons.shape[:-1]
        )
        # padding rows become [0, 1] for validation, [0, 0] afterwards
        pad = torch.tensor([0, 1], dtype=comparisons.dtype, device=comparisons.device)
        comparisons = torch.where(comparison_mask.unsqueeze(-1), comparisons, pad)
    datapoints, comparisons = validate_pairwise_data(datapoints, comparisons)
    if comparison_mask is not None:
        comparison_mask = comparison_mask.expand(comparisons.shape[:-1])
        comparisons = torch.where(
            comparison_mask.unsqueeze(-1),
            comparisons,
            torch.zeros_like(comparisons),
        )
    if design_mask is not None:
        datapoints, design_mask = check_mask(
            datapoints, design_mask, "design_mask", datapoints.shape[:-1]
        )
        design_mask = design_mask.expand(datapoints.shape[:-1])
        _check_padding(design_mask, comparisons, comparison_mask)
    return datapoints, comparisons, design_mask, comparison_mask


def _check_padding(
    design_mask: Tensor, comparisons: Tensor, comparison_mask: Tensor | None
) -> None:
    r"""Every batch element has a real design, and real comparisons refer to
    real designs only."""
    empty = ~design_mask.any(-1)
    if bool(empty.any()):
        where = f"of batch element(s) {empty.nonzero().tolist()} " if empty.ndim else ""
        raise InputDataError(
            f"design_mask marks every design {where}as padding; a model "
            "needs at least one real design."
        )
    # designs used by real comparisons (padding rows [0, 0] excluded)
    dev = comparisons.device
    if comparison_mask is None:
        real = torch.ones(comparisons.shape[:-1], dtype=torch.long, device=dev)
    else:
        real = comparison_mask.to(torch.long)
    used = torch.zeros(design_mask.shape, dtype=torch.long, device=dev)
    used.scatter_add_(-1, comparisons[..., 0], real)
    used.scatter_add_(-1, comparisons[..., 1], real)
    if bool(((used > 0) & ~design_mask).any()):
        raise InputDataError(
            "comparisons refer to designs that design_mask marks as padding; "
            "mark those comparisons False in comparison_mask (or the "
            "designs True in design_mask)."
        )


def check_same_layout(
    datapoints: Tensor,
    comparisons: Tensor,
    old_datapoints: Tensor,
    old_comparisons: Tensor,
) -> None:
    r"""``strict=True`` replacement: the new data keep the old shapes, dtypes
    and devices.

    Raises:
        InputDataError: Naming the first attribute that changed.
    """
    for name, new, old in (
        ("datapoints", datapoints, old_datapoints),
        ("comparisons", comparisons, old_comparisons),
    ):
        for attr in ("shape", "dtype", "device"):
            if getattr(new, attr) != getattr(old, attr):
                raise InputDataError(
                    f"strict=True: cannot change the {attr} of {name} "
                    f"(expected {getattr(old, attr)}, got "
                    f"{getattr(new, attr)})."
                )


def padded_train_covariance(
    K: Tensor, design_mask: Tensor | None, nugget: float | None
) -> Tensor:
    r"""``K + nugget · mean(diag K) · I`` with padding designs uncoupled.

    Padding designs get an independent ``N(0, 1)`` prior, uncoupled from the
    real ones; the mean of the diagonal is over the real designs.

    Args:
        K: ``batch_shape x n x n`` prior covariance at the training designs.
        design_mask: Optional ``batch_shape x n`` bool (False: padding).
        nugget: Relative diagonal term; default ``1e-8`` (float64) /
            ``1e-6`` (float32).

    Returns:
        ``batch_shape x n x n`` training covariance.
    """
    if design_mask is not None:
        # padding designs: independent N(0, 1), uncoupled from real ones
        m = design_mask.to(K)
        K = K * (m.unsqueeze(-1) * m.unsqueeze(-2)) + torch.diag_embed(1.0 - m)
    if nugget is None:
        nugget = 1e-8 if K.dtype == torch.float64 else 1e-6
    if nugget:
        diag = K.diagonal(dim1=-2, dim2=-1)
        if design_mask is None:
            scale = diag.mean(-1, keepdim=True)
        else:  # the real designs' mean prior variance
            m = design_mask.to(diag)
            scale = (diag * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True)
        # in place on the kernel's fresh output (autograd checks that no
        # saved tensor is modified): no n x n diag_embed and no extra pass.
        # Without a graph K might be a kernel's stored tensor: copy it.
        if K.grad_fn is None:
            K = K.clone()
        K.diagonal(dim1=-2, dim2=-1).add_(nugget * scale)
    return K
