r"""Told answers and the comparisons they stand for.

A question offers ``q`` options; the answer is the index of the chosen one,
stored as the ``q - 1`` comparisons "winner ≻ each other option".
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.utils.checks import describe


@dataclass(frozen=True)
class Answer:
    r"""One told answer: the ``q x d`` options and the chosen index.

    ``virtual``: the ``k x 2 x d`` virtual comparisons ``[inner, face]``
    ("``inner`` ≻ ``face``") made while its question was computed
    (:mod:`prefbo.loop.boundary`), or ``None``.
    """

    seq: int
    options: Tensor
    answer: int
    virtual: Tensor | None = None


def _outside_box(options: Tensor, bounds: Tensor, row: str = "option") -> str | None:
    r"""``"<row> i has x[j] = v outside [lo, hi]"`` for the first entry of
    ``options`` that is not finite or not in the box, else ``None``."""
    lo, hi = bounds
    bad = ~torch.isfinite(options) | (options < lo) | (options > hi)
    if not bool(bad.any()):
        return None
    i, j = (int(v) for v in bad.nonzero()[0])
    return (
        f"{row} {i} has x[{j}] = {float(options[i, j])!r} outside "
        f"[{float(lo[j])!r}, {float(hi[j])!r}]"
    )


def check_designs(name: str, X: Any, bounds: Tensor) -> Tensor:
    r"""``n x d`` designs of the box: a real tensor, finite and inside it.

    Args:
        name: The argument's name (for messages).
        X: What was passed.
        bounds: ``2 x d`` box ``[lower, upper]``.

    Returns:
        ``X`` as float64.

    Raises:
        InputTypeError: ``X`` is not a real floating or integer tensor.
        InputDataError: ``X`` is not ``n x d``, or has an entry that is not
            finite or outside the box (named).
    """
    if not isinstance(X, Tensor) or X.dtype == torch.bool or X.is_complex():
        what = type(X).__name__ if not isinstance(X, Tensor) else str(X.dtype)
        raise InputTypeError(f"{name} must be a real torch.Tensor; got {what}.")
    d = bounds.shape[-1]
    if X.ndim != 2 or X.shape[-1] != d:
        raise InputDataError(
            f"{name} must have shape n x {d} (designs of the box); got "
            f"{tuple(X.shape)}."
        )
    X = X.to(bounds)
    outside = _outside_box(X, bounds, row="row")
    if outside is not None:
        raise InputDataError(f"{name} must lie in the box bounds; {outside}.")
    return X


def check_question(options: Tensor, bounds: Tensor) -> None:
    r"""A told ``q x d`` question: finite, inside the box, options distinct.

    Args:
        options: ``q x d`` float64 options.
        bounds: ``2 x d`` box ``[lower, upper]``.

    Raises:
        InputDataError: Naming the offending option and value.
    """
    if not bool(torch.isfinite(options).all()):
        raise InputDataError(f"options must be finite; got {options.tolist()}.")
    outside = _outside_box(options, bounds)
    if outside is not None:
        raise InputDataError(f"options must lie in the box bounds; {outside}.")
    q = options.shape[0]
    same = (options.unsqueeze(0) == options.unsqueeze(1)).all(-1)  # q x q
    same = same & ~torch.eye(q, dtype=torch.bool)
    if bool(same.any()):
        i, j = (int(v) for v in same.nonzero()[0])
        raise InputDataError(
            f"options must be distinct designs; options {i} and {j} are the same "
            f"point {options[i].tolist()} (an answer about a design and itself "
            "says nothing)."
        )


def check_new_options(new: Any, num_new: int, bounds: Tensor, strategy: str) -> None:
    r"""The options a strategy chose: a ``num_new x d`` finite tensor in the box.

    A strategy of one's own that returns something else is named here, at
    :meth:`~prefbo.loop.PreferentialOptimizer.ask`, instead of the answer
    about its question failing later.

    Args:
        new: What the strategy's ``acquire`` returned.
        num_new: The number of options it was asked for.
        bounds: ``2 x d`` box ``[lower, upper]``.
        strategy: The strategy's registered name.

    Raises:
        InputTypeError: ``new`` is not a floating tensor.
        InputDataError: ``new`` is not ``num_new x d``, not finite, or
            outside the box.
    """
    d = bounds.shape[-1]
    if not isinstance(new, Tensor) or not new.is_floating_point():
        raise InputTypeError(
            f"strategy {strategy!r} must return a floating {num_new} x {d} tensor "
            f"of options; got {type(new).__name__}"
            + (f" of dtype {new.dtype}." if isinstance(new, Tensor) else ".")
        )
    if tuple(new.shape) != (num_new, d):
        raise InputDataError(
            f"strategy {strategy!r} must return {num_new} x {d} options; got shape "
            f"{tuple(new.shape)}."
        )
    outside = _outside_box(new, bounds)
    if outside is not None:
        raise InputDataError(
            f"strategy {strategy!r} must return finite options in the box; {outside}."
        )


def _float64(value: Any, expected: str) -> Tensor:
    r"""``value`` as a float64 tensor, or an ``InputTypeError``: "``expected``;
    got ..."."""
    try:
        return torch.as_tensor(value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise InputTypeError(f"{expected}; got {describe(value)}.") from None


def check_answer(answer: Any, options: Any, bounds: Tensor) -> tuple[Tensor, int]:
    r"""A told answer and its question, checked.

    Args:
        answer: Index of the chosen option: an int, a NumPy integer or a 0-d
            torch integer tensor (not a bool or a float).
        options: ``q x d`` options (``q >= 2``), converted to float64.
        bounds: ``2 x d`` box ``[lower, upper]``.

    Returns:
        ``(options, answer)``: the ``q x d`` float64 options and the int index.

    Raises:
        InputTypeError: ``answer`` is not an int (a bool, a float, a string),
            or ``options`` are not numbers.
        InputDataError: ``answer`` is not an index of ``options``, or
            ``options`` are not ``q x d``, not finite, outside the box, or
            not distinct designs.
    """
    d = bounds.shape[-1]
    options = _float64(
        options,
        f"options must be a q x d tensor (or nested list) of numbers with d={d}",
    )
    if options.ndim != 2 or options.shape[-1] != d or options.shape[0] < 2:
        raise InputDataError(
            f"options must be a q x d tensor with q >= 2 and d={d}; got "
            f"shape {tuple(options.shape)}."
        )
    try:  # ints, NumPy and 0-d torch integers; not bools or floats
        if isinstance(answer, bool) or (
            isinstance(answer, Tensor) and answer.dtype == torch.bool
        ):
            raise TypeError
        answer = operator.index(answer)
    except TypeError:
        raise InputTypeError(
            f"answer must be an int index of the options; got {describe(answer)}."
        ) from None
    if not 0 <= answer < options.shape[0]:
        raise InputDataError(
            f"answer must index one of the {options.shape[0]} options "
            f"(0..{options.shape[0] - 1}); got answer={answer}."
        )
    check_question(options, bounds)
    return options, answer


def check_virtual(virtual: Any, bounds: Tensor) -> Tensor:
    r"""Logged virtual comparisons: ``k x 2 x d`` finite designs in the box.

    Raises:
        InputTypeError: ``virtual`` is not numbers.
        InputDataError: Not ``k x 2 x d`` (``k >= 1``), or a design not
            finite or outside the box.
    """
    d = bounds.shape[-1]
    virtual = _float64(virtual, f"virtual must be a k x 2 x {d} list of numbers")
    if virtual.ndim != 3 or virtual.shape[0] < 1 or virtual.shape[1:] != (2, d):
        raise InputDataError(
            f"virtual must be a k x 2 x {d} list (k >= 1); got shape "
            f"{tuple(virtual.shape)}."
        )
    outside = _outside_box(virtual.reshape(-1, d), bounds, row="design")
    if outside is not None:
        raise InputDataError(f"virtual must lie in the box bounds; {outside}.")
    same = (virtual[:, 0] == virtual[:, 1]).all(-1)
    if bool(same.any()):
        i = int(same.nonzero()[0])
        raise InputDataError(
            f"virtual comparisons must compare distinct designs; comparison {i} "
            f"compares {virtual[i, 0].tolist()} with itself."
        )
    return virtual


def pairs_from(tells: list[Answer]) -> tuple[Tensor, Tensor]:
    r"""The designs and comparisons of ``tells``.

    Args:
        tells: Answers, oldest first.

    Returns:
        ``(designs, comparisons)``: ``n x d`` float64 designs (exact
        duplicates merged, in order of first appearance) and ``m x 2`` long
        ``[winner, loser]`` indices into them.
    """
    index: dict[tuple[float, ...], int] = {}
    rows = []
    for t in tells:
        idx = [index.setdefault(tuple(x.tolist()), len(index)) for x in t.options]
        w = idx[t.answer]
        rows += [[w, j] for j in idx if j != w]
    designs = torch.tensor(list(index), dtype=torch.float64)
    return designs, torch.tensor(rows, dtype=torch.long).reshape(-1, 2)
