r"""Index tensors shared by the preference-data containers.

Answers index into their designs (or contexts and labels) and are stored as
``k x s`` long tensors, ``-1`` padded where rows are ragged. These helpers
build such tensors from tensors or ragged sequences with typed errors that
name the argument, move padding to the end of each row, and remap the indices
of a subset of answers to the designs they touch (for minibatches).
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError


def as_index_tensor(
    x: object,
    name: str,
    upper: int,
    *,
    device: torch.device,
    padding: bool,
    shape_text: str,
) -> Tensor:
    r"""A ``k x s`` long tensor from a tensor or a ragged sequence of sequences.

    Args:
        x: An integer (or integer-valued floating) ``k x s`` tensor, or a
            sequence of ``k`` sequences of ints; ragged rows are padded with
            ``-1`` at the end.
        name: The argument's name, for messages.
        upper: Indices must lie in ``[0, upper)``.
        device: The device a tensor ``x`` must be on, and that a sequence
            ``x`` is moved to.
        padding: Whether ``-1`` (padding) is allowed.
        shape_text: The expected shape, for messages (e.g. ``"k x s"``).

    Returns:
        A ``k x s`` long tensor on ``device`` with at least one row.
    """
    if isinstance(x, Tensor):
        if x.dtype == torch.bool or x.is_complex():
            raise InputTypeError(
                f"{name} must be an integer tensor of indices; got {x.dtype}."
            )
        if x.is_floating_point():
            if not bool((torch.isfinite(x) & (x == x.round())).all()):
                raise InputDataError(
                    f"{name} must hold integer indices; got non-integer values "
                    f"(dtype {x.dtype})."
                )
        if x.device != device:
            raise InputDataError(
                f"{name} must be on the designs' device {device}; got {x.device}."
            )
        out = x.long()
    elif isinstance(x, Sequence) and not isinstance(x, str):
        rows = []
        for i, row in enumerate(x):
            if isinstance(row, Tensor):
                row = row.tolist()
            if not isinstance(row, Sequence) or isinstance(row, str):
                raise InputTypeError(
                    f"{name} must be a {shape_text} tensor or a sequence of sequences "
                    f"of indices; row {i} is {type(row).__name__}."
                )
            if not all(
                isinstance(v, Integral) and not isinstance(v, bool) for v in row
            ):
                raise InputTypeError(
                    f"{name} must hold integer indices; row {i} is {list(row)}."
                )
            rows.append(list(row))
        width = max((len(r) for r in rows), default=0)
        out = torch.full((len(rows), width), -1, dtype=torch.long)
        for i, row in enumerate(rows):
            out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        out = out.to(device)
    else:
        raise InputTypeError(
            f"{name} must be a {shape_text} tensor or a sequence of sequences of "
            f"indices; got {type(x).__name__}."
        )
    if out.ndim != 2:
        raise InputDataError(
            f"{name} must have shape {shape_text}; got {tuple(out.shape)}."
        )
    if out.shape[0] == 0:
        raise InputDataError(
            f"{name} must hold at least one row; got shape {tuple(out.shape)}."
        )
    low = -1 if padding else 0
    if out.numel() > 0 and (int(out.min()) < low or int(out.max()) >= upper):
        pad = " or -1 for padding" if padding else ""
        raise InputDataError(
            f"{name} must hold indices in [0, {upper - 1}]{pad}; got min "
            f"{int(out.min())}, max {int(out.max())}."
        )
    return out


def check_no_duplicates(x: Tensor, name: str, what: str) -> None:
    r"""Raise if a row of ``x`` repeats an index (``-1`` padding may repeat).

    Args:
        x: A ``k x s`` long tensor, ``-1`` padded.
        name: The argument's name, for messages.
        what: What an index stands for, for messages (e.g. ``"a design"``).
    """
    ranked = x.sort(-1).values
    dup = (ranked[:, 1:] == ranked[:, :-1]) & (ranked[:, 1:] >= 0)
    if bool(dup.any()):
        row = int(dup.any(-1).nonzero()[0])
        raise InputDataError(
            f"{name} must not repeat {what} within a row; row {row} is "
            f"{x[row].tolist()}."
        )


def compact_padding(x: Tensor, *others: Tensor) -> tuple[Tensor, ...]:
    r"""Move ``-1`` padding to the end of each row (stable), dropping empty columns.

    Args:
        x: A ``k x s`` long tensor, ``-1`` padded anywhere in a row.
        others: ``k x s`` tensors aligned with ``x``, permuted alongside it.

    Returns:
        ``(x, *others)``, each ``k x s'`` with ``s'`` the longest row of ``x``.
    """
    order = (x < 0).long().argsort(dim=-1, stable=True)
    width = int((x >= 0).sum(-1).max())
    return tuple(t.gather(-1, order)[:, :width] for t in (x, *others))


def remap_indices(
    design_index: Tensor, num_designs: int, *rows: Tensor
) -> tuple[Tensor, ...]:
    r"""Map design indices in ``rows`` to positions in ``design_index`` (-1 kept).

    Args:
        design_index: A ``u`` long tensor of distinct indices in
            ``[0, num_designs)``.
        num_designs: The number of designs the indices in ``rows`` refer to.
        rows: Long tensors of indices in ``design_index``, or ``-1``.

    Returns:
        ``rows`` with each index ``design_index[p]`` replaced by ``p``.
    """
    lut = torch.full((num_designs,), -1, dtype=torch.long, device=design_index.device)
    lut[design_index] = torch.arange(design_index.shape[0], device=design_index.device)
    return tuple(torch.where(r >= 0, lut[r.clamp_min(0)], r) for r in rows)


def touched_indices(*rows: Tensor) -> Tensor:
    r"""The sorted distinct indices (``-1`` padding dropped) that ``rows`` hold.

    Args:
        rows: Long tensors of indices, ``-1`` padded.

    Returns:
        A ``u`` long tensor, sorted.
    """
    flat = torch.cat([r.reshape(-1) for r in rows])
    return torch.unique(flat[flat >= 0])
