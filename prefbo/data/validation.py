r"""Validation of pairwise comparison data.

Every check raises a typed prefbo error that names the argument, what was
expected and what came. Nothing is dropped or repaired: repeated comparisons
count every time.
"""

from __future__ import annotations

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.utils.checks import check_same_device

__all__ = [
    "broadcast_batches",
    "check_bounds",
    "validate_comparisons",
    "validate_datapoints",
    "validate_pairwise_data",
]


def validate_datapoints(datapoints: object, name: str = "datapoints") -> Tensor:
    r"""Check designs and return them as a ``batch_shape x n x d`` tensor.

    Args:
        datapoints: A ``batch_shape x n x d`` float32 or float64 tensor (a
            1-d ``n`` tensor is read as ``n x 1``, as BoTorch does); half
            precision is refused, as the kernels' Cholesky factorisations
            have no float16 implementation.
        name: The argument's name, for messages.

    Returns:
        The designs, with a trailing feature dimension added if it was 1-d.
    """
    if not isinstance(datapoints, Tensor):
        raise InputTypeError(
            f"{name} must be a torch.Tensor of shape batch_shape x n x d; got "
            f"{type(datapoints).__name__}."
        )
    if datapoints.dtype not in (torch.float32, torch.float64):
        # half precision included: torch's kernels (pdist, Cholesky) lack it
        raise InputTypeError(
            f"{name} must be a floating tensor of dtype float32 or float64; got "
            f"{datapoints.dtype}. Convert with {name}.double()."
        )
    if datapoints.ndim == 1:
        datapoints = datapoints.unsqueeze(-1)
    if datapoints.ndim < 2:
        raise InputDataError(
            f"{name} must have shape batch_shape x n x d; got "
            f"{tuple(datapoints.shape)}."
        )
    n, d = datapoints.shape[-2:]
    if n == 0 or d == 0:
        raise InputDataError(
            f"{name} must hold at least one design of at least one feature; got "
            f"shape {tuple(datapoints.shape)}."
        )
    finite = torch.isfinite(datapoints)
    if not bool(finite.all()):
        bad = (~finite).nonzero()[0].tolist()
        raise InputDataError(
            f"{name} must be finite; got {datapoints[tuple(bad)].item()} at index "
            f"{tuple(bad)} ({int((~finite).sum())} non-finite entries)."
        )
    return datapoints


def validate_comparisons(
    comparisons: object, n: int, name: str = "comparisons"
) -> Tensor:
    r"""Check ``[winner, loser]`` rows and return them as a long tensor.

    Args:
        comparisons: A ``batch_shape x m x 2`` tensor of indices into the
            ``n`` designs; integer, or floating with integral values (BoTorch
            examples build it with ``torch.Tensor``).
        n: The number of designs.
        name: The argument's name, for messages.

    Returns:
        A ``batch_shape x m x 2`` long tensor.
    """
    if not isinstance(comparisons, Tensor):
        raise InputTypeError(
            f"{name} must be a torch.Tensor of shape batch_shape x m x 2; got "
            f"{type(comparisons).__name__}."
        )
    if comparisons.dtype == torch.bool or comparisons.is_complex():
        raise InputTypeError(
            f"{name} must be an integer tensor of indices; got {comparisons.dtype}."
        )
    if comparisons.ndim < 2 or comparisons.shape[-1] != 2:
        raise InputDataError(
            f"{name} must have shape batch_shape x m x 2 (rows [winner, loser]); "
            f"got {tuple(comparisons.shape)}."
        )
    if comparisons.shape[-2] == 0:
        raise InputDataError(
            f"{name} must hold at least one comparison; got shape "
            f"{tuple(comparisons.shape)}. Pass datapoints=None and comparisons=None "
            "for a prior-only model."
        )
    if comparisons.is_floating_point():
        if not bool(torch.isfinite(comparisons).all()) or not bool(
            (comparisons == comparisons.round()).all()
        ):
            bad = comparisons[
                ~(torch.isfinite(comparisons) & (comparisons == comparisons.round()))
            ]
            raise InputDataError(
                f"{name} must hold integer indices; got non-integer value "
                f"{bad[0].item()} (dtype {comparisons.dtype})."
            )
    comparisons = comparisons.long()
    lo, hi = int(comparisons.min()), int(comparisons.max())
    if lo < 0 or hi >= n:
        raise InputDataError(
            f"{name} must be indices into datapoints in [0, {n - 1}] (n={n}); got "
            f"min {lo}, max {hi}."
        )
    same = comparisons[..., 0] == comparisons[..., 1]
    if bool(same.any()):
        where = same.nonzero()[0].tolist()
        raise InputDataError(
            f"{name} must compare two different designs; row {tuple(where)} compares "
            f"design {int(comparisons[tuple(where)][0])} with itself."
        )
    return comparisons


def broadcast_batches(
    first: str, first_batch: torch.Size, second: str, second_batch: torch.Size
) -> torch.Size:
    r"""The broadcast of two batch shapes, or an error naming both arguments.

    Args:
        first: The first argument's name.
        first_batch: Its batch shape.
        second: The second argument's name.
        second_batch: Its batch shape.

    Returns:
        The broadcast batch shape.
    """
    try:
        return torch.broadcast_shapes(first_batch, second_batch)
    except RuntimeError:
        raise InputDataError(
            f"{first} and {second} must have broadcastable batch shapes; got "
            f"{first} batch {tuple(first_batch)} and {second} batch "
            f"{tuple(second_batch)}."
        ) from None


def validate_pairwise_data(
    datapoints: object, comparisons: object
) -> tuple[Tensor, Tensor]:
    r"""Validate designs and comparisons together and broadcast their batches.

    Args:
        datapoints: ``batch_shape x n x d`` designs.
        comparisons: ``batch_shape x m x 2`` ``[winner, loser]`` indices.

    Returns:
        ``(datapoints, comparisons)`` expanded to a common batch shape, the
        comparisons as a long tensor.
    """
    datapoints = validate_datapoints(datapoints)
    comparisons = validate_comparisons(comparisons, n=datapoints.shape[-2])
    check_same_device("comparisons", comparisons, "datapoints", datapoints)
    batch = broadcast_batches(
        "datapoints", datapoints.shape[:-2], "comparisons", comparisons.shape[:-2]
    )
    return (
        datapoints.expand(batch + datapoints.shape[-2:]),
        comparisons.expand(batch + comparisons.shape[-2:]),
    )


#: The fewest representable values a box's side must span (:func:`check_bounds`).
MIN_BOX_STEPS = 1024


def check_bounds(bounds: object) -> None:
    r"""Check a ``2 x d`` box ``[lower, upper]``: finite, ``lower < upper``, of
    finite width ``upper - lower`` (points are drawn as ``lower + width * u``)
    and spanning at least :data:`MIN_BOX_STEPS` representable values per side.

    Raises:
        InputDataError: Anything else, named.
    """
    if not isinstance(bounds, Tensor) or bounds.ndim != 2 or bounds.shape[0] != 2:
        raise InputDataError(
            "bounds must be a 2 x d tensor [lower, upper]; got "
            + (
                str(tuple(bounds.shape))
                if isinstance(bounds, Tensor)
                else type(bounds).__name__
            )
            + "."
        )
    # tiny: checked on the host, one device-to-host copy on an accelerator
    bounds = bounds.detach().cpu()
    if not bool(torch.isfinite(bounds).all()):
        raise InputDataError(f"bounds must be finite; got {bounds.tolist()}.")
    if not bool((bounds[0] < bounds[1]).all()):
        raise InputDataError(f"bounds must have lower < upper; got {bounds.tolist()}.")
    width = bounds[1] - bounds[0]
    if not bool(torch.isfinite(width).all()):
        j = int((~torch.isfinite(width)).nonzero()[0])
        raise InputDataError(
            f"bounds must have a finite width upper - lower; x[{j}] has "
            f"[{float(bounds[0, j])!r}, {float(bounds[1, j])!r}], whose width "
            f"overflows {bounds.dtype}."
        )
    if not bounds.is_floating_point():
        return  # the callers' own type checks name integer bounds
    # the float spacing at the box's largest magnitude: a box of a handful of
    # representable values cannot hold two distinct designs drawn in it
    top = torch.maximum(bounds[0].abs(), bounds[1].abs())
    spacing = torch.nextafter(top, torch.full_like(top, torch.inf)) - top
    steps = torch.floor(width / spacing)
    if bool((steps < MIN_BOX_STEPS).any()):
        j = int((steps < MIN_BOX_STEPS).nonzero()[0])
        raise InputDataError(
            f"bounds must be wide enough to hold distinct designs: x[{j}] has "
            f"[{float(bounds[0, j])!r}, {float(bounds[1, j])!r}], whose width spans "
            f"only {int(steps[j])} step{'s' if int(steps[j]) != 1 else ''} of "
            f"{str(bounds.dtype).removeprefix('torch.')} (at least "
            f"{MIN_BOX_STEPS} are needed); rescale the variable."
        )
