r"""Pairwise comparisons of designs: "``w`` beats ``l``" and "indiscernible".

:class:`PairwiseComparisons` holds ``batch_shape x n x d`` designs with
``m x 2`` rows ``[winner, loser]`` (BoTorch's convention) and, optionally,
``m_b x 2`` rows ``[i, j]`` of pairs judged indiscernible
(just-noticeable-difference data). Answers are never batched; duplicated
answers count each time.
"""

from __future__ import annotations

import torch
from torch import Tensor

from prefbo.data.conversions import (
    check_pair_mode,
    orderings_to_pairs,
    validate_orderings,
)
from prefbo.data.indices import remap_indices, touched_indices
from prefbo.data.validation import validate_comparisons, validate_datapoints
from prefbo.exceptions import InputDataError


def _check_pair_rows(x: object, n: int, name: str, device: torch.device) -> Tensor:
    out = validate_comparisons(x, n=n, name=name)
    if out.ndim != 2:
        raise InputDataError(
            f"{name} must be an m x 2 tensor (answers are not batched; designs may "
            f"be); got {tuple(out.shape)}."
        )
    if out.device != device:
        raise InputDataError(
            f"{name} must be on the designs' device {device}; got {out.device}."
        )
    return out


class PairwiseComparisons:
    r"""Designs and pairwise answers: "``w`` beats ``l``" and "indiscernible".

    Attributes:
        datapoints: A ``batch_shape x n x d`` tensor of designs.
        comparisons: An ``m x 2`` long tensor of ``[winner, loser]`` rows.
        indiscernible: An ``m_b x 2`` long tensor of ``[i, j]`` rows, or
            ``None``.
    """

    def __init__(
        self,
        datapoints: Tensor,
        comparisons: Tensor,
        indiscernible: Tensor | None = None,
    ) -> None:
        r"""
        Args:
            datapoints: A ``batch_shape x n x d`` floating tensor of designs.
            comparisons: An ``m x 2`` tensor of ``[winner, loser]`` indices
                into the designs (BoTorch's convention).
            indiscernible: An optional ``m_b x 2`` tensor of ``[i, j]`` rows,
                "no noticeable difference" (just-noticeable-difference data).
        """
        datapoints = validate_datapoints(datapoints)
        n, device = datapoints.shape[-2], datapoints.device
        self.datapoints = datapoints
        self.comparisons = _check_pair_rows(comparisons, n, "comparisons", device)
        self.indiscernible = (
            None
            if indiscernible is None
            else _check_pair_rows(indiscernible, n, "indiscernible", device)
        )

    @classmethod
    def _unchecked(
        cls, datapoints: Tensor, comparisons: Tensor, indiscernible: Tensor | None
    ) -> PairwiseComparisons:
        self = cls.__new__(cls)
        self.datapoints, self.comparisons, self.indiscernible = (
            datapoints,
            comparisons,
            indiscernible,
        )
        return self

    @classmethod
    def from_rankings(
        cls, datapoints: Tensor, orderings: object, mode: str = "adjacent"
    ) -> PairwiseComparisons:
        r"""Pairwise comparisons from rankings of designs.

        Args:
            datapoints: A ``batch_shape x n x d`` tensor of designs.
            orderings: A ``k x r`` tensor (``-1`` padded) or ragged sequence of
                design indices, best first.
            mode: ``"adjacent"`` or ``"all"`` pairs of each ranking.

        Returns:
            The comparisons ``[better, worse]``, grouped by ranking.
        """
        datapoints = validate_datapoints(datapoints)
        check_pair_mode(mode)
        orderings = validate_orderings(orderings, datapoints.shape[-2])
        pairs, _ = orderings_to_pairs(orderings.to(datapoints.device), mode)
        return cls(datapoints, pairs)

    @property
    def num_designs(self) -> int:
        r"""``n``, the number of designs."""
        return self.datapoints.shape[-2]

    @property
    def num_answers(self) -> int:
        r"""``m + m_b``: comparisons, then indiscernible pairs."""
        extra = 0 if self.indiscernible is None else self.indiscernible.shape[0]
        return self.comparisons.shape[0] + extra

    @property
    def answers(self) -> tuple[Tensor, ...]:
        r"""``(comparisons,)`` or ``(comparisons, indiscernible)``."""
        if self.indiscernible is None:
            return (self.comparisons,)
        return (self.comparisons, self.indiscernible)

    def select(
        self, answer_index: Tensor
    ) -> tuple[PairwiseComparisons, Tensor, Tensor]:
        r"""The answers ``answer_index`` and the designs they touch.

        Args:
            answer_index: A ``b`` long tensor; entries ``< m`` are comparisons,
                the rest indiscernible pairs (offset by ``m``).

        Returns:
            ``(data, design_index, answer_index)``: the sub-data with indices
            remapped to its ``u`` designs, the ``u`` sorted global design
            indices, and the answers in the sub-data's order (comparisons
            first).
        """
        m = self.comparisons.shape[0]
        first = answer_index[answer_index < m]
        rows = [self.comparisons[first]]
        order = [first]
        if self.indiscernible is not None:
            second = answer_index[answer_index >= m]
            rows.append(self.indiscernible[second - m])
            order.append(second)
        design_index = touched_indices(*rows)
        rows = remap_indices(design_index, self.num_designs, *rows)
        data = PairwiseComparisons._unchecked(
            self.datapoints[..., design_index, :],
            rows[0],
            rows[1] if len(rows) > 1 else None,
        )
        return data, design_index, torch.cat(order)

    def __repr__(self) -> str:
        mb = (
            "" if self.indiscernible is None else f", m_b={self.indiscernible.shape[0]}"
        )
        return (
            f"PairwiseComparisons(datapoints={tuple(self.datapoints.shape)}, "
            f"m={self.comparisons.shape[0]}{mb})"
        )
