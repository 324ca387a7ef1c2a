r"""A finite pool of items described by features: recipes from a menu, wines,
songs, photos.

An :class:`ItemPool` is a variable whose values are item ids. The model sees
an item as its feature row, each feature scaled to ``[0, 1]`` over the pool
(min-max: the pool's smallest value at 0, its largest at 1), so a kernel
compares items by their features and what is learnt about one item carries
to similar ones. Decoding a model point gives the item nearest to it in the
scaled features.

A pool can sit in a :class:`~prefbo.space.Space` beside other variables (a
photo and the strength of a filter applied to it), or alone.

Example:
    >>> pool = ItemPool("wine", ["a", "b", "c"], [[12.5, 3.1], [13.0, 2.0],
    ...                                          [11.0, 3.3]],
    ...                 feature_names=["alcohol", "acidity"])
    >>> pool.encode("b")
    [1.0, 0.0]
    >>> pool.decode([0.9, 0.2])
    'b'
"""

from __future__ import annotations

import numbers
from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.space.variables import Value, Variable, _evenly, _unit
from prefbo.utils.checks import describe


def _ids(name: str, ids: object) -> list[Value]:
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise InputTypeError(f"{name}: ids must be a list; got {describe(ids)}.")
    out = list(ids)
    for i in out:
        if isinstance(i, bool) or not isinstance(i, (str, numbers.Integral)):
            raise InputTypeError(
                f"{name}: each item id must be a str or an int; got {describe(i)}."
            )
    repeated = sorted(str(i) for i, c in Counter(out).items() if c > 1)
    if repeated:
        raise InputDataError(
            f"{name}: item ids must be distinct; repeated: {repeated}."
        )
    if len(out) < 2:
        raise InputDataError(f"{name}: a pool needs at least two items; got {out!r}.")
    return out


class ItemPool(Variable):
    r"""Items by id, each described by a row of numeric features.

    Args:
        name: The variable's name.
        ids: Distinct item ids (str or int), at least two.
        features: ``len(ids) x k`` finite numbers (a nested list, a NumPy
            array or a tensor), ``k ≥ 1``.
        feature_names: Optional names of the ``k`` features.

    Raises:
        InputTypeError: A wrong type (the message names the argument).
        InputDataError: Repeated ids, a ragged or non-finite feature table,
            or two items with the same features (the model could not tell
            them apart: add a feature that does, or merge them).
    """

    kind = "items"

    def __init__(
        self,
        name: str,
        ids: Sequence[Value],
        features: object,
        feature_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(name)
        self._values = _ids(self.name, ids)
        try:
            table = torch.as_tensor(features, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError) as e:
            raise InputTypeError(
                f"{self.name}: features must be a table of numbers (items x features);"
                f" got {describe(features)} ({e})."
            ) from e
        n = len(self._values)
        if table.ndim != 2 or table.shape[0] != n or table.shape[1] < 1:
            raise InputDataError(
                f"{self.name}: features must be {n} x k (one row per item, k >= 1); "
                f"got shape {tuple(table.shape)}."
            )
        if not bool(torch.isfinite(table).all()):
            raise InputDataError(f"{self.name}: features must be finite numbers.")
        if feature_names is not None:
            names = list(feature_names)
            if len(names) != table.shape[1] or not all(
                isinstance(f, str) for f in names
            ):
                raise InputDataError(
                    f"{self.name}: feature_names must be {table.shape[1]} strings; got "
                    f"{names!r}."
                )
            feature_names = names
        self.features = table
        self.feature_names = feature_names
        self.levels = n
        self.width = table.shape[1]
        low, high = table.amin(0), table.amax(0)
        span = torch.where(high > low, high - low, torch.ones_like(high))
        self._encoded = (table - low) / span  # constant features sit at 0
        # equal scaled rows, by sorting (memory linear in the items)
        _, group, counts = torch.unique(
            self._encoded, dim=0, return_inverse=True, return_counts=True
        )
        if bool((counts > 1).any()):
            twins = (group == int((counts > 1).nonzero()[0])).nonzero().flatten()
            i, j = int(twins[0]), int(twins[1])
            raise InputDataError(
                f"{self.name}: items {self._values[i]!r} and {self._values[j]!r} have "
                "the same features, so the model cannot tell them apart; add a feature "
                "that does, or merge them."
            )

    def index(self, value: object) -> int:
        r"""The row of item ``value`` (typed errors otherwise)."""
        if isinstance(value, bool) or not isinstance(value, (str, numbers.Integral)):
            raise InputTypeError(
                f"{self.name}: the value must be an item id; got {describe(value)}."
            )
        try:
            return self._values.index(value)
        except ValueError:
            raise InputDataError(
                f"{self.name}: no item has the id {value!r} ({self.levels} items)."
            ) from None

    def encode(self, value: object) -> list[float]:  # noqa: D102
        return self._encoded[self.index(value)].tolist()

    def decode(self, columns: Sequence[float]) -> Value:  # noqa: D102
        if len(columns) != self.width:
            raise InputDataError(
                f"{self.name}: {self.width} model columns are needed; got "
                f"{len(columns)}."
            )
        u = torch.tensor([_unit(self.name, c) for c in columns], dtype=torch.float64)
        distance = (self._encoded - u).square().sum(-1)
        return self._values[int(torch.argmin(distance))]

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:  # noqa: D102
        picks = torch.randint(self.levels, (n,), generator=generator)
        return self._encoded[picks]  # n x k

    def spread(self, k: int) -> list[Value]:  # noqa: D102
        return _evenly(self._values, k)

    def values(self) -> list[Value]:  # noqa: D102
        return list(self._values)

    def encoded(self) -> torch.Tensor:
        r"""``items x k`` model columns of every item, in the order of the ids."""
        return self._encoded.clone()

    def to_dict(self) -> dict[str, Any]:  # noqa: D102
        d: dict[str, Any] = {"type": self.kind, "name": self.name}
        d["ids"] = list(self._values)
        d["features"] = self.features.tolist()
        if self.feature_names is not None:
            d["feature_names"] = list(self.feature_names)
        return d

    def __repr__(self) -> str:
        k = f", features={self.feature_names!r}" if self.feature_names else ""
        return f"ItemPool({self.name!r}, {self.levels} items{k})"
