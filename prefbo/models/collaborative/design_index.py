r"""Rows of a design table found by the designs' bytes.

A collaborative model keeps one table of designs: a pool's items first,
then each new design a person compared. Looking ``k`` designs up in a table
of ``n`` rows by comparing them costs ``O(k n)``; :class:`DesignIndex`
keeps a hash index of the table and costs ``O(k)``. Equal designs share
their first row, so a pool's item keeps its id (and its own effect) however
it is passed again.
"""

from __future__ import annotations

from torch import Tensor


def design_keys(X: Tensor) -> list[bytes]:
    r"""Hashable keys of ``n x d`` designs, equal for equal rows (``-0.0``
    as ``0.0``)."""
    return [row.tobytes() for row in (X.detach() + 0.0).cpu().numpy()]


class DesignIndex:
    r"""Design (its bytes) to its first row in a table, rebuilt where the
    table is not the one indexed (moved, cast, loaded, or a copy's)."""

    def __init__(self) -> None:
        self._of: tuple[int, int] | None = None
        self._rows: dict[bytes, int] = {}

    def rows(self, table: Tensor) -> dict[bytes, int]:
        r"""The index of ``table`` (``n x d``): each design's first row."""
        of = (table.data_ptr(), table.shape[0])
        if of != self._of:
            self._rows = {}
            for row, key in enumerate(design_keys(table)):
                self._rows.setdefault(key, row)
            self._of = of
        return self._rows

    def find(self, table: Tensor, X: Tensor) -> list[int]:
        r"""The first row of ``table`` equal to each of ``k x d`` designs
        ``X`` (in the table's dtype), ``-1`` where none is."""
        rows = self.rows(table)
        return [rows.get(key, -1) for key in design_keys(X)]

    def add(self, table: Tensor, X: Tensor) -> tuple[list[int], list[int]]:
        r"""Rows of ``k x d`` designs ``X`` in ``table``, the designs it lacks
        numbered after its rows (once for equal new designs).

        Returns:
            ``(rows, new)``: each design's row, and the positions in ``X`` of
            the designs to append, in order. Call :meth:`extended` with the
            table once they are appended.
        """
        index, n = self.rows(table), table.shape[0]
        rows, new = [], []
        for position, key in enumerate(design_keys(X)):
            row = index.get(key)
            if row is None:
                row = index[key] = n + len(new)
                new.append(position)
            rows.append(row)
        return rows, new

    def extended(self, table: Tensor) -> None:
        r"""Take ``table``, the indexed one with :meth:`add`'s new designs
        appended, as the one indexed."""
        self._of = (table.data_ptr(), table.shape[0])
