r"""A circular variable: a real value whose upper bound is its lower one (a
hue in degrees, a time of day, a wind direction), encoded as two columns,
a point on the circle of radius ½ about ``(½, ½)``; decoding takes the
direction from the centre.

Why two columns for a circle: the squared distance between two encoded
values is ``sin²(Δθ / 2)`` (``Δθ`` their angle apart), so every stationary
kernel on the unit cube, the default RBF included, is periodic in the value:
hue 359° is as near hue 1° as 1° is to 3°, and there is no face at 0° or
360° for the acquisition's variance to pile up on. Opposite values are 1
apart, as the ends of a continuous column are. An ARD kernel gives the two
columns their own lengthscales: equal ones (as every default kernel starts)
make it stationary in the angle, unequal ones let its smoothness vary around
the circle, still periodic and positive definite. The optimisers search the
square around the circle and :meth:`~prefbo.space.Space.snap` projects each
option back onto it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError
from prefbo.space.variables import Value, Variable, _real, _show, _unit
from prefbo.utils.checks import check_int


class Circular(Variable):
    r"""A real value in ``[lower, upper)`` whose upper bound is its lower one
    (``upper`` itself is accepted and means ``lower``): a hue in degrees, a
    time of day, a direction.

    Two columns, the point ``(½ + ½ cos θ, ½ + ½ sin θ)`` with
    ``θ = 2π (value - lower) / (upper - lower)``; decoding takes the
    direction of the columns from ``(½, ½)`` (the centre itself decodes to
    ``lower``). See the module docstring for why.

    Example:
        >>> Circular("hue", 0.0, 360.0).encode(90.0)
        [0.5, 1.0]
    """

    kind = "circular"
    width = 2

    def __init__(self, name: str, lower: object, upper: object) -> None:
        super().__init__(name)
        self.lower = _real(self.name, "lower", lower)
        self.upper = _real(self.name, "upper", upper)
        if not self.lower < self.upper:
            raise InputDataError(
                f"{self.name}: lower < upper is needed; got lower={self.lower!r}, "
                f"upper={self.upper!r}."
            )

    def encode(self, value: object) -> list[float]:  # noqa: D102
        value = _real(self.name, "the value", value)
        if not self.lower <= value <= self.upper:
            raise InputDataError(
                f"{self.name}: the value must lie in [{_show(self.lower)}, "
                f"{_show(self.upper)}] (the upper bound is the lower one); got "
                f"{value!r}."
            )
        turn = (value - self.lower) / (self.upper - self.lower)
        angle = 2 * math.pi * (turn if turn < 1 else 0.0)
        return [0.5 + 0.5 * math.cos(angle), 0.5 + 0.5 * math.sin(angle)]

    def decode(self, columns: Sequence[float]) -> float:  # noqa: D102
        if len(columns) != self.width:
            raise InputDataError(
                f"{self.name}: {self.width} model columns are needed; got "
                f"{len(columns)}."
            )
        c, s = (_unit(self.name, x) for x in columns)
        turn = (math.atan2(s - 0.5, c - 0.5) / (2 * math.pi)) % 1.0
        value = self.lower + turn * (self.upper - self.lower)
        return value if value < self.upper else self.lower  # a full turn: lower

    def sample(self, n: int, generator: torch.Generator) -> Tensor:  # noqa: D102
        angle = 2 * math.pi * torch.rand(n, generator=generator, dtype=torch.float64)
        return torch.stack([0.5 + 0.5 * angle.cos(), 0.5 + 0.5 * angle.sin()], -1)

    def spread(self, k: int) -> list[Value]:
        r"""``k`` values at equal steps around the circle from ``lower`` (the
        last a step short of ``upper``, which is ``lower`` again)."""
        k = check_int("k", k, 1)
        return [self.lower + i * (self.upper - self.lower) / k for i in range(k)]

    def to_dict(self) -> dict[str, Any]:  # noqa: D102
        return {
            "type": self.kind,
            "name": self.name,
            "lower": self.lower,
            "upper": self.upper,
        }
