r"""A study's search space: named variables, and the model's unit cube.

:class:`Space` holds the variables (:mod:`prefbo.space.variables`) in order and
converts between a person's view, a dict ``{name: value}`` per design, and
the model's view, a ``n x dim`` tensor in ``[0, 1]^dim`` (the variables'
columns side by side). It also enumerates finite spaces, draws uniform
designs, snaps model points to the nearest representable design, and reads
and writes the ``space.json`` form.

Example:
    >>> space = Space([
    ...     Categorical("font", ["serif", "sans", "mono"]),
    ...     Integer("size", 8, 24),
    ...     Continuous("contrast", 0.5, 2.0, log=True),
    ... ])
    >>> space.dim
    5
    >>> X = space.encode([{"font": "sans", "size": 12, "contrast": 1.0}])
    >>> space.decode(X)
    [{'font': 'sans', 'size': 12, 'contrast': 1.0}]
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.space.circular import Circular
from prefbo.space.pool import ItemPool
from prefbo.space.variables import (
    Categorical,
    Continuous,
    Integer,
    Ordinal,
    Variable,
)
from prefbo.utils.checks import check_int, check_seed, describe

#: The variable classes by their JSON ``"type"``.
KINDS: dict[str, type[Variable]] = {
    cls.kind: cls
    for cls in (Continuous, Integer, Ordinal, Categorical, Circular, ItemPool)
}


def variable_from_dict(entry: object) -> Variable:
    r"""A variable from its JSON form (:meth:`Variable.to_dict`).

    An entry without ``"type"`` but with ``"lower"`` and ``"upper"`` is a
    continuous variable (the form of ``space.json`` files before the other
    kinds existed).

    Raises:
        InputTypeError: ``entry`` is not a dict, or a field has the wrong type.
        InputDataError: An unknown ``type``, missing or extra fields.
    """
    if not isinstance(entry, dict):
        raise InputTypeError(
            f"a variable must be a JSON object; got {describe(entry)}."
        )
    fields = dict(entry)
    kind = fields.pop("type", "continuous")
    if not isinstance(kind, str) or kind not in KINDS:
        raise InputDataError(
            f"a variable's type must be one of {sorted(KINDS)}; got {kind!r} in "
            f"{entry!r}."
        )
    try:
        return KINDS[kind](**fields)
    except TypeError as e:
        if isinstance(e, InputTypeError):
            raise
        raise InputDataError(
            f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} variable's fields do "
            f"not fit: {entry!r} ({e})."
        ) from e


#: The largest finite space :meth:`Space.grid` enumerates unless told more.
MAX_GRID = 1_000_000


class Space:
    r"""Named variables and their unit-cube encoding.

    Args:
        variables: The :class:`~prefbo.space.variables.Variable` objects, at
            least one, with distinct names.

    Attributes:
        variables: The variables, in order.
        names: Their names.
        dim: The number of model columns.
        slices: Each variable's columns.
    """

    def __init__(self, variables: Sequence[Variable]) -> None:
        if isinstance(variables, (str, bytes)) or not isinstance(variables, Sequence):
            raise InputTypeError(
                f"variables must be a list of Variable; got {describe(variables)}."
            )
        for v in variables:
            if not isinstance(v, Variable):
                raise InputTypeError(
                    f"variables must be Variable objects; got {describe(v)}."
                )
        names = [v.name for v in variables]
        if not names:
            raise InputDataError("variables must hold at least one variable; got [].")
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise InputDataError(
                f"variable names must be distinct; repeated: {repeated}."
            )
        self.variables = list(variables)
        self.names = names
        self.slices: list[slice] = []
        start = 0
        for v in self.variables:
            self.slices.append(slice(start, start + v.width))
            start += v.width
        self.dim = start

    # ------------------------------------------------------------ the maps
    def encode(
        self, designs: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> Tensor:
        r"""``n x dim`` float64 model points of ``designs`` (dicts by name; a
        single dict gives ``1 x dim``).

        Raises:
            InputTypeError: A design is not a dict, or a value has the wrong type.
            InputDataError: A design misses a variable or names an unknown
                one, or a value lies outside its variable.
        """
        if isinstance(designs, Mapping):
            designs = [designs]
        if isinstance(designs, (str, bytes)) or not isinstance(designs, Sequence):
            raise InputTypeError(
                f"designs must be a dict or a list of dicts; got {describe(designs)}."
            )
        rows = []
        for i, design in enumerate(designs):
            if not isinstance(design, Mapping):
                raise InputTypeError(
                    f"design {i} must be a dict; got {describe(design)}."
                )
            missing = [n for n in self.names if n not in design]
            unknown = sorted(str(k) for k in design if k not in self.names)
            if missing or unknown:
                raise InputDataError(
                    f"design {i} must name each variable once: missing {missing}, "
                    f"unknown {unknown}."
                )
            row: list[float] = []
            for v in self.variables:
                row += v.encode(design[v.name])
            rows.append(row)
        return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), self.dim)

    def decode(self, X: Tensor) -> list[dict[str, Any]]:
        r"""The designs (dicts by name) nearest the model points ``X``
        (``n x dim`` or ``dim``) in each variable's columns.

        Raises:
            InputTypeError: ``X`` is not a real tensor.
            InputDataError: ``X`` has the wrong last dimension, or an entry
                outside ``[0, 1]`` (or NaN).
        """
        X = self._points("X", X)
        out = []
        for row in X.tolist():
            out.append(
                {v.name: v.decode(row[s]) for v, s in zip(self.variables, self.slices)}
            )
        return out

    def snap(self, X: Tensor) -> Tensor:
        r"""The model points of the designs nearest ``X``: continuous columns
        unchanged, a circular variable's on its circle, the others on their
        values (``encode(decode(X))``)."""
        return self.encode(self.decode(X)).to(X)  # decode checks X

    def _points(self, name: str, X: object) -> Tensor:
        if not isinstance(X, Tensor) or not X.is_floating_point():
            raise InputTypeError(f"{name} must be a real tensor; got {describe(X)}.")
        if X.ndim == 1:
            X = X.unsqueeze(0)
        if X.ndim != 2 or X.shape[-1] != self.dim:
            raise InputDataError(
                f"{name} must be n x {self.dim} (the space's model columns); got shape "
                f"{tuple(X.shape)}."
            )
        bad = ~((X >= 0) & (X <= 1))
        if bool(bad.any()):
            i, j = (int(k) for k in bad.nonzero()[0])
            raise InputDataError(
                f"{name} must lie in the unit cube [0, 1]^{self.dim}; got "
                f"{X[i, j].item()!r} at row {i}, column {j}."
            )
        return X

    # ------------------------------------------------------ finite spaces
    @property
    def size(self) -> int | None:
        r"""The number of designs of a finite space (``None`` if a variable
        is continuous)."""
        levels = [v.levels for v in self.variables]
        if any(k is None for k in levels):
            return None
        return math.prod(levels)  # type: ignore[arg-type]

    def grid(self, max_size: int = MAX_GRID) -> Tensor:
        r"""Every design of a finite space as ``size x dim`` model points, the
        last variable varying fastest.

        Raises:
            InputDataError: A variable is continuous, or the space holds more
                than ``max_size`` designs.
        """
        max_size = check_int("max_size", max_size, 1)
        size = self.size
        if size is None:
            continuous = [v.name for v in self.variables if v.levels is None]
            raise InputDataError(
                f"only a finite space has a grid; continuous variables: {continuous}."
            )
        if size > max_size:
            raise InputDataError(
                f"the space holds {size} designs, more than max_size={max_size}; raise "
                "max_size or score a sample of designs instead."
            )
        designs = [
            dict(zip(self.names, combo))
            for combo in itertools.product(*(v.values() for v in self.variables))
        ]
        return self.encode(designs)

    def sample(self, n: int, seed: int | None = None) -> Tensor:
        r"""``n x dim`` model points of designs drawn uniformly in the person's
        view: each value of a finite variable equally likely, a continuous
        one uniform in its value, a circular one in its angle; on a log scale
        (continuous or integer) uniform in the logarithm, rounded to the
        integers for an integer. Each variable draws in turn from one stream
        (:meth:`~prefbo.space.variables.Variable.sample`), without listing
        its values: the cost is linear in ``n``, whatever the levels."""
        n = check_int("n", n, 1)
        g = torch.Generator()
        if check_seed("seed", seed, allow_none=True) is None:
            g.seed()
        else:
            g.manual_seed(seed)
        return torch.cat([v.sample(n, g) for v in self.variables], dim=-1)

    # ---------------------------------------------------------------- json
    def to_dict(self) -> dict[str, Any]:
        r"""The ``space.json`` form ``{"variables": [...]}``."""
        return {"variables": [v.to_dict() for v in self.variables]}

    @classmethod
    def from_dict(cls, data: object) -> Space:
        r"""The space of a ``space.json`` form (see :meth:`to_dict`; entries
        without ``"type"`` are continuous, as in older files)."""
        if not isinstance(data, Mapping) or "variables" not in data:
            raise InputDataError(
                'a space must be a JSON object {"variables": [...]}; got '
                f"{describe(data)}."
            )
        entries = data["variables"]
        if not isinstance(entries, list):
            raise InputTypeError(
                f'"variables" must be a list; got {describe(entries)}.'
            )
        return cls([variable_from_dict(e) for e in entries])

    @classmethod
    def read(cls, path: str | Path) -> Space:
        r"""The space in the JSON file ``path``."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise InputDataError(
                f"the space file {str(path)!r} could not be read as JSON: "
                f"{type(e).__name__}: {e}"
            ) from e
        return cls.from_dict(data)

    def __repr__(self) -> str:
        return f"Space({self.variables!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and other.to_dict() == self.to_dict()

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))
