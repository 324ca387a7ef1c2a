r"""The variables of a study's search space, each between a person's view and
the model's unit-cube columns.

A person sees values (a sweetness of 3.5, 12 servings, the font "serif"); the
models see real columns in ``[0, 1]``. Each variable maps one to the other:

- :class:`Continuous`: one column, linear in the value, or in its logarithm
  with ``log=True`` (a learning rate between 1e-4 and 1e-1: equal ratios are
  equal steps);
- :class:`Integer`: one column, the integers ``lower … upper`` at equal steps
  (``log=True``: at equal steps of their logarithm); a column between two of
  them decodes to the nearest;
- :class:`Ordinal`: one column, ordered values (numbers or labels) at equal
  steps, whatever their spacing;
- :class:`Categorical`: one column per choice, one-hot. Decoding takes the
  largest column (the first of equal ones);
- :class:`~prefbo.space.circular.Circular` (its own module): two columns,
  a point on a circle, for a value whose upper bound is its lower one.

No variable lists its values to sample, encode or decode (an integer with
10⁹ levels costs what one with 10 does). An :class:`Integer`'s levels must
be as many as its float64 column tells apart: ``upper - lower`` at most
:data:`MAX_INTEGER_SPAN` (2⁵³), and on a log scale ``upper`` at most
:data:`MAX_LOG_INTEGER` (2⁴⁰); wider ranges are refused when the variable is
made, never rounded silently.

Why one-hot for categories: every prefbo model takes any GPyTorch kernel on the
unit cube, and a stationary ARD kernel on a one-hot block gives each pair of
choices its own similarity (``exp(-(1/ℓ_a² + 1/ℓ_b²)/2)`` for an RBF with
per-column lengthscales), as rich as BoTorch's ``CategoricalKernel`` (one
lengthscale per variable) and usable by the Laplace, EP, skew and variational
models alike, while the acquisition optimisers fix the block at each choice in
turn (no relaxation ever decodes off the one-hot corners unseen).

Every method checks its input: a wrong type raises
:class:`~prefbo.exceptions.InputTypeError`, a value outside the variable
:class:`~prefbo.exceptions.InputDataError`, each naming the variable.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.utils.checks import check_int, describe

Value = float | int | str

#: The widest ``upper - lower`` of an :class:`Integer`: float64 holds every
#: ``k / span`` of a wider one only to within more than half a level, so
#: decoding could not give back every value.
MAX_INTEGER_SPAN = 2**53

#: The largest ``upper`` of an :class:`Integer` on a log scale: its top
#: levels are ``1 / (upper · ln(upper / lower))`` apart in the column, at
#: 2⁴⁰ still ~10⁴ times the rounding of the logarithms.
MAX_LOG_INTEGER = 2**40


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise InputTypeError(
            f"a variable's name must be a non-empty str; got {describe(name)}."
        )
    return name


def _real(name: str, what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputTypeError(
            f"{name}: {what} must be a finite number; got {describe(value)}."
        )
    value = float(value)
    if not math.isfinite(value):
        raise InputDataError(f"{name}: {what} must be a finite number; got {value!r}.")
    return value


def _unit(name: str, column: object) -> float:
    r"""A model column of ``name``, a finite real in ``[0, 1]``."""
    u = _real(name, "a model column", column)
    if not 0.0 <= u <= 1.0:
        raise InputDataError(f"{name}: a model column must lie in [0, 1]; got {u!r}.")
    return u


class Variable:
    r"""One variable: its name, its ``width`` (model columns) and the maps.

    Subclasses define :meth:`encode` (value to columns), :meth:`decode`
    (columns to the nearest value), :meth:`sample` (uniform draws, as
    columns), :meth:`spread` (a few values across the range), :attr:`levels`
    (the number of values, or ``None`` for a continuum), :meth:`values` (all
    of them, when finite) and :meth:`to_dict` (the JSON form read by
    :func:`~prefbo.space.space.variable_from_dict`).
    """

    kind = ""
    width = 1
    levels: int | None = None

    def __init__(self, name: str) -> None:
        self.name = _check_name(name)

    def encode(self, value: object) -> list[float]:  # noqa: D102
        raise NotImplementedError

    def decode(self, columns: Sequence[float]) -> Value:  # noqa: D102
        raise NotImplementedError

    def sample(self, n: int, generator: torch.Generator) -> Tensor:
        r"""Model columns of ``n`` values drawn uniformly in the person's view.

        Args:
            n: The number of draws.
            generator: The random stream.

        Returns:
            ``n x width`` float64 columns.
        """
        raise NotImplementedError

    def spread(self, k: int) -> list[Value]:
        r"""At most ``k`` distinct values evenly spread over the variable, in
        order: the values at ``k`` equal steps of its column from 0 to 1
        (fewer where neighbours decode to the same value)."""
        k = check_int("k", k, 1)
        steps = torch.linspace(0, 1, k, dtype=torch.float64).tolist()
        return list(dict.fromkeys(self.decode([u]) for u in steps))

    def values(self) -> list[Value]:
        r"""Every value, in order (finite variables only; a list of
        :attr:`levels` values, so check their number first)."""
        raise InputDataError(
            f"{self.name}: a continuous variable has no finite list of values."
        )

    def to_dict(self) -> dict[str, Any]:  # noqa: D102
        raise NotImplementedError

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items() if k != "type")
        return f"{type(self).__name__}({body})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_dict() == self.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self))


def _show(bound: float | int) -> str:
    r"""A bound as a person reads it: an int in full, a float short."""
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def _evenly(values: Sequence[Value], k: int) -> list[Value]:
    r"""At most ``k`` of ``values`` at equal steps of their positions, in order."""
    k = check_int("k", k, 1)
    last = len(values) - 1
    positions = dict.fromkeys(round(j * last / max(k - 1, 1)) for j in range(k))
    return [values[i] for i in positions]


class _Scaled(Variable):
    r"""A number between ``lower`` and ``upper``, mapped linearly or on a log scale."""

    def __init__(
        self, name: str, lower: object, upper: object, log: bool = False
    ) -> None:
        super().__init__(name)
        self.lower = self._bound("lower", lower)
        self.upper = self._bound("upper", upper)
        if not isinstance(log, bool):
            raise InputTypeError(
                f"{self.name}: log must be a bool; got {describe(log)}."
            )
        if not self.lower < self.upper:
            raise InputDataError(
                f"{self.name}: lower < upper is needed; got lower={self.lower!r}, "
                f"upper={self.upper!r}."
            )
        if log and self.lower <= 0:
            raise InputDataError(
                f"{self.name}: a log scale needs lower > 0; got lower={self.lower!r}."
            )
        self.log = log

    def _bound(self, what: str, value: object) -> Any:
        return _real(self.name, what, value)

    def _to_unit(self, value: Any) -> float:
        # ints stay ints: their differences and quotients are then exact
        # (correctly rounded), however far from zero the bounds lie
        if not self.lower <= value <= self.upper:
            raise InputDataError(
                f"{self.name}: the value must lie in [{_show(self.lower)}, "
                f"{_show(self.upper)}]; got {value!r}."
            )
        if self.log:
            u = math.log(value / self.lower) / math.log(self.upper / self.lower)
        else:
            u = (value - self.lower) / (self.upper - self.lower)
        return min(max(u, 0.0), 1.0)

    def to_dict(self) -> dict[str, Any]:  # noqa: D102
        d: dict[str, Any] = {"type": self.kind, "name": self.name}
        d.update(lower=self.lower, upper=self.upper)
        if self.log:
            d["log"] = True
        return d

    def _from_unit(self, u: float) -> float:
        if self.log:
            value = self.lower * (self.upper / self.lower) ** u
        else:
            value = self.lower + u * (self.upper - self.lower)
        return min(max(value, self.lower), self.upper)


class Continuous(_Scaled):
    r"""A real value in ``[lower, upper]`` (``log=True``: on a log scale).

    Example:
        >>> Continuous("rate", 1e-4, 1e-1, log=True).encode(1e-2)
        [0.666...]
    """

    kind = "continuous"

    def encode(self, value: object) -> list[float]:  # noqa: D102
        return [self._to_unit(_real(self.name, "the value", value))]

    def decode(self, columns: Sequence[float]) -> float:  # noqa: D102
        return self._from_unit(_unit(self.name, columns[0]))

    def sample(self, n: int, generator: torch.Generator) -> Tensor:  # noqa: D102
        # uniform in the (log) value is uniform in the column
        return torch.rand(n, 1, generator=generator, dtype=torch.float64)


class Integer(_Scaled):
    r"""An integer in ``lower … upper`` (``log=True``: steps equal in ratio).

    The bounds may be any ints, but ``upper - lower`` at most
    :data:`MAX_INTEGER_SPAN` and, on a log scale, ``upper`` at most
    :data:`MAX_LOG_INTEGER`: then every level has its own column value and
    decodes back to itself. Nothing lists the levels but :meth:`values`.

    Raises:
        InputTypeError: A bound is not an int.
        InputDataError: ``lower >= upper``, a log scale with ``lower <= 0``,
            or a range wider than the limits (the message names both).
    """

    kind = "integer"

    def __init__(
        self, name: str, lower: object, upper: object, log: bool = False
    ) -> None:
        super().__init__(name, lower, upper, log)
        span = self.upper - self.lower
        if span > MAX_INTEGER_SPAN:
            raise InputDataError(
                f"{self.name}: upper - lower must be at most 2**53 = "
                f"{MAX_INTEGER_SPAN} (float64 tells no more levels apart in the "
                f"model's column); got upper - lower = {span} (lower={self.lower}, "
                f"upper={self.upper}). Narrow the range, or use a continuous "
                "variable and round its values."
            )
        if log and self.upper > MAX_LOG_INTEGER:
            raise InputDataError(
                f"{self.name}: a log-scale integer's upper must be at most 2**40 = "
                f"{MAX_LOG_INTEGER} (its top levels would lie closer in the model's "
                f"column than its rounding); got upper={self.upper}. Use log=False, "
                "or a continuous variable with log=True and round its values."
            )
        self.levels = span + 1

    def _bound(self, what: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise InputTypeError(
                f"{self.name}: {what} must be an int; got {describe(value)}."
            )
        return int(value)  # type: ignore[call-overload]

    def encode(self, value: object) -> list[float]:  # noqa: D102
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise InputTypeError(
                f"{self.name}: the value must be an int; got {describe(value)}."
            )
        return [self._to_unit(int(value))]  # type: ignore[call-overload]

    def decode(self, columns: Sequence[float]) -> int:  # noqa: D102
        # the nearest integer in the model's columns (not in the value's)
        u = _unit(self.name, columns[0])
        if not self.log:  # k / span nearest u, exactly; ties to the smaller
            step = math.ceil(Fraction(u) * (self.upper - self.lower) - Fraction(1, 2))
            return self.lower + step
        x = self._from_unit(u)
        below, above = math.floor(x), math.ceil(x)
        near = min((below, above), key=lambda v: (abs(self._to_unit(v) - u), v))
        return int(near)

    def sample(self, n: int, generator: torch.Generator) -> Tensor:  # noqa: D102
        if self.log:  # uniform in the logarithm, then the nearest level
            u = torch.rand(n, generator=generator, dtype=torch.float64).tolist()
            columns = [self.encode(self.decode([x])) for x in u]
            return torch.tensor(columns, dtype=torch.float64).reshape(n, 1)
        step = torch.randint(self.levels, (n,), generator=generator)
        # k / span in float64, correctly rounded as encode's int division is
        return (step.to(torch.float64) / (self.upper - self.lower)).unsqueeze(-1)

    def values(self) -> list[Value]:  # noqa: D102
        return list(range(self.lower, self.upper + 1))


def _choices(name: str, what: str, values: object) -> list[Value]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InputTypeError(f"{name}: {what} must be a list; got {describe(values)}.")
    out = list(values)
    for v in out:
        if isinstance(v, bool) or not isinstance(v, (str, numbers.Real)):
            raise InputTypeError(
                f"{name}: each of the {what} must be a str or a number; got "
                f"{describe(v)}."
            )
        if isinstance(v, numbers.Real) and not math.isfinite(float(v)):
            raise InputDataError(f"{name}: the {what} must be finite; got {v!r}.")
    if len(out) < 2 or len(set(out)) != len(out):
        raise InputDataError(
            f"{name}: at least two distinct {what} are needed; got {out!r}."
        )
    return out


class _Listed(Variable):
    r"""A variable with a list of allowed values."""

    what = "values"

    def __init__(self, name: str, values: object) -> None:
        super().__init__(name)
        self._values = _choices(self.name, self.what, values)
        self.levels = len(self._values)

    def index(self, value: object) -> int:
        r"""The position of ``value`` in the list (typed errors otherwise)."""
        if isinstance(value, bool) or not isinstance(value, (str, numbers.Real)):
            raise InputTypeError(
                f"{self.name}: the value must be one of {self._values!r}; got "
                f"{describe(value)}."
            )
        try:
            return self._values.index(value)
        except ValueError:
            raise InputDataError(
                f"{self.name}: the value must be one of {self._values!r}; got "
                f"{value!r}."
            ) from None

    def sample(self, n: int, generator: torch.Generator) -> Tensor:  # noqa: D102
        picks = torch.randint(self.levels, (n,), generator=generator).tolist()
        columns = [self.encode(self._values[k]) for k in picks]
        return torch.tensor(columns, dtype=torch.float64).reshape(n, self.width)

    def spread(self, k: int) -> list[Value]:  # noqa: D102
        return _evenly(self._values, k)

    def values(self) -> list[Value]:  # noqa: D102
        return list(self._values)

    def to_dict(self) -> dict[str, Any]:  # noqa: D102
        return {"type": self.kind, "name": self.name, self.what: list(self._values)}


class Ordinal(_Listed):
    r"""Ordered values (numbers or labels), one column at equal steps."""

    kind = "ordinal"

    def encode(self, value: object) -> list[float]:  # noqa: D102
        return [self.index(value) / (self.levels - 1)]

    def decode(self, columns: Sequence[float]) -> Value:  # noqa: D102
        u = _unit(self.name, columns[0])
        return self._values[int(math.floor(u * (self.levels - 1) + 0.5))]


class Categorical(_Listed):
    r"""Unordered choices, one-hot (one column per choice)."""

    kind = "categorical"
    what = "choices"

    def __init__(self, name: str, choices: object) -> None:
        super().__init__(name, choices)
        self.width = self.levels

    def encode(self, value: object) -> list[float]:  # noqa: D102
        columns = [0.0] * self.width
        columns[self.index(value)] = 1.0
        return columns

    def decode(self, columns: Sequence[float]) -> Value:  # noqa: D102
        if len(columns) != self.width:
            raise InputDataError(
                f"{self.name}: {self.width} model columns are needed; got "
                f"{len(columns)}."
            )
        u = [_unit(self.name, c) for c in columns]
        return self._values[u.index(max(u))]
