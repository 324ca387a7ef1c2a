r"""Checks of scalar arguments (counts, seeds, tolerances, scales), one rule for all.

Every checker returns the value as a plain Python ``int`` or ``float`` and
raises a typed error whose message names the argument, what was expected and
what came:

- a wrong type (a ``bool`` or a string where a number is expected, a ``float``
  where an ``int`` is) raises :class:`~prefbo.exceptions.InputTypeError`;
- a value of the right type outside the allowed range (below the minimum,
  NaN, infinite) raises :class:`~prefbo.exceptions.InputDataError`.

Integers are Python or NumPy integers (never ``bool``); floats are Python or
NumPy reals or 0-d real tensors (never ``bool``). With ``allow_none=True``,
``None`` passes through unchanged.

Example:
    >>> check_int("num_samples", 64, minimum=1)
    64
    >>> check_nonneg_float("tol", None, allow_none=True) is None
    True
    >>> check_int("num_samples", 2.5, minimum=1)
    Traceback (most recent call last):
        ...
    prefbo.exceptions.InputTypeError: num_samples must be an int >= 1; got float 2.5.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError

SEED_RANGE = (-(2**63), 2**64 - 1)
r"""The integers a ``torch.Generator`` accepts as a seed."""


def describe(value: object) -> str:
    r"""``value`` as a message shows a wrong-typed argument: its type, then its repr.

    ``None`` shows as itself; tensors show their dtype and shape instead of their
    entries.
    """
    if value is None:
        return "None"
    if isinstance(value, Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return f"{type(value).__name__} {value!r}"


def _number(x: float) -> str:
    r"""A bound as messages print it (``0``, ``1``, ``0.5``)."""
    return f"{x:g}" if isinstance(x, float) else str(x)


def _or_none(expected: str, allow_none: bool) -> str:
    return f"None or {expected}" if allow_none else expected


def check_int(
    name: str,
    value: object,
    minimum: int | None = None,
    *,
    allow_none: bool = False,
) -> int | None:
    r"""Check an integer argument, optionally with a lower bound.

    Args:
        name: The argument's name, for messages.
        value: A Python or NumPy integer (not a ``bool``).
        minimum: The smallest allowed value (``None``: any integer).
        allow_none: Whether ``None`` is allowed (and returned).

    Returns:
        ``value`` as an ``int`` (``None`` where allowed and given).

    Raises:
        InputTypeError: ``value`` is not an integer.
        InputDataError: ``value`` is below ``minimum``.
    """
    if value is None and allow_none:
        return None
    expected = "an int" if minimum is None else f"an int >= {minimum}"
    expected = _or_none(expected, allow_none)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputTypeError(f"{name} must be {expected}; got {describe(value)}.")
    value = int(value)
    if minimum is not None and value < minimum:
        raise InputDataError(f"{name} must be {expected}; got {name}={value}.")
    return value


def check_seed(name: str, value: object, *, allow_none: bool = False) -> int | None:
    r"""Check a seed: an integer that ``torch.Generator.manual_seed`` accepts.

    Args:
        name: The argument's name, for messages.
        value: A Python or NumPy integer in ``[-2**63, 2**64 - 1]``.
        allow_none: Whether ``None`` (no seed) is allowed (and returned).

    Returns:
        ``value`` as an ``int`` (``None`` where allowed and given).

    Raises:
        InputTypeError: ``value`` is not an integer.
        InputDataError: ``value`` is outside ``[-2**63, 2**64 - 1]``.
    """
    value = check_int(name, value, allow_none=allow_none)
    if value is not None and not SEED_RANGE[0] <= value <= SEED_RANGE[1]:
        raise InputDataError(
            f"{name} must be in [-2**63, 2**64 - 1] (a torch.Generator seed); got "
            f"{name}={value}."
        )
    return value


def check_float(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    open_minimum: bool = False,
    open_maximum: bool = False,
    allow_none: bool = False,
) -> float | None:
    r"""Check a finite real argument, optionally within an interval.

    Args:
        name: The argument's name, for messages.
        value: A Python or NumPy real or a 0-d real tensor (not a ``bool``).
        minimum: The lower bound (``None``: none).
        maximum: The upper bound (``None``: none).
        open_minimum: Whether ``value == minimum`` is excluded.
        open_maximum: Whether ``value == maximum`` is excluded.
        allow_none: Whether ``None`` is allowed (and returned).

    Returns:
        ``value`` as a ``float`` (``None`` where allowed and given).

    Raises:
        InputTypeError: ``value`` is not a real number.
        InputDataError: ``value`` is not finite or outside the interval.
    """
    if value is None and allow_none:
        return None
    low = ">" if open_minimum else ">="
    high = "<" if open_maximum else "<="
    if minimum is not None and maximum is not None:
        expected = (
            f"a float in {'(' if open_minimum else '['}{_number(minimum)}, "
            f"{_number(maximum)}{')' if open_maximum else ']'}"
        )
    elif minimum is not None:
        expected = f"a finite float {low} {_number(minimum)}"
    elif maximum is not None:
        expected = f"a finite float {high} {_number(maximum)}"
    else:
        expected = "a finite float"
    expected = _or_none(expected, allow_none)
    if isinstance(value, Tensor):
        real = value.ndim == 0 and not (value.is_complex() or value.dtype == torch.bool)
    else:
        real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not real:
        raise InputTypeError(f"{name} must be {expected}; got {describe(value)}.")
    value = float(value)
    above = minimum is None or (value > minimum if open_minimum else value >= minimum)
    below = maximum is None or (value < maximum if open_maximum else value <= maximum)
    if not (math.isfinite(value) and above and below):
        raise InputDataError(f"{name} must be {expected}; got {name}={value!r}.")
    return value


def check_nonneg_float(
    name: str, value: object, allow_none: bool = False
) -> float | None:
    r"""Check a finite real ``>= 0`` (see :func:`check_float`)."""
    return check_float(name, value, minimum=0, allow_none=allow_none)


def check_positive_float(
    name: str, value: object, allow_none: bool = False
) -> float | None:
    r"""Check a finite real ``> 0`` (see :func:`check_float`)."""
    return check_float(name, value, minimum=0, open_minimum=True, allow_none=allow_none)


def check_same_device(name: str, t: Tensor, like_name: str, like: Tensor) -> None:
    r"""Raise unless ``t`` is on ``like``'s device.

    Raises:
        InputDataError: Naming both tensors and their devices.
    """
    if t.device != like.device:
        raise InputDataError(
            f"{name} must be on {like_name}'s device {like.device}; got {t.device}."
        )
