r"""Label data on contexts: paired label comparisons and rankings of labels.

Both containers hold ``batch_shape x N x d`` contexts and answers about ``L``
labels in each context:

- :class:`LabelComparisons`: ``m x 3`` rows ``[context, winner label, loser
  label]``;
- :class:`Rankings`: one ordering of labels per context, best first, full or
  partial, stored ``-1`` padded; :meth:`Rankings.to_pairs` gives the label
  comparisons it implies.
"""

from __future__ import annotations

import torch
from torch import Tensor

from prefbo.data.conversions import orderings_to_pairs, validate_orderings
from prefbo.data.indices import as_index_tensor, remap_indices, touched_indices
from prefbo.data.validation import validate_datapoints
from prefbo.exceptions import InputDataError
from prefbo.utils.checks import check_int


class LabelComparisons:
    r"""Contexts and paired label comparisons ``[context, winner, loser]``.

    Attributes:
        features: A ``batch_shape x N x d`` tensor of contexts.
        comparisons: An ``m x 3`` long tensor of ``[context, winner label,
            loser label]`` rows.
        num_labels: ``L``.
    """

    def __init__(self, features: Tensor, comparisons: object, num_labels: int) -> None:
        r"""
        Args:
            features: A ``batch_shape x N x d`` floating tensor of contexts.
            comparisons: An ``m x 3`` integer tensor (or sequence of rows) of
                ``[context, winner label, loser label]``.
            num_labels: ``L``, the number of labels.
        """
        features = validate_datapoints(features, name="features")
        num_labels = check_int("num_labels", num_labels, 2)
        big = max(features.shape[-2], num_labels)
        comparisons = as_index_tensor(
            comparisons,
            "comparisons",
            big,
            device=features.device,
            padding=False,
            shape_text="m x 3",
        )
        if comparisons.shape[-1] != 3:
            raise InputDataError(
                "comparisons must have shape m x 3 ([context, winner label, loser "
                f"label]); got {tuple(comparisons.shape)}."
            )
        n = features.shape[-2]
        if (
            int(comparisons[:, 0].max()) >= n
            or int(comparisons[:, 1:].max()) >= num_labels
        ):
            raise InputDataError(
                f"comparisons must hold contexts in [0, {n - 1}] and labels in "
                f"[0, {num_labels - 1}]; got max context "
                f"{int(comparisons[:, 0].max())}, max label "
                f"{int(comparisons[:, 1:].max())}."
            )
        same = comparisons[:, 1] == comparisons[:, 2]
        if bool(same.any()):
            row = int(same.nonzero()[0])
            raise InputDataError(
                f"comparisons must compare two different labels; row {row} is "
                f"{comparisons[row].tolist()}."
            )
        self.features, self.comparisons, self.num_labels = (
            features,
            comparisons,
            num_labels,
        )

    @classmethod
    def _unchecked(
        cls, features: Tensor, comparisons: Tensor, num_labels: int
    ) -> LabelComparisons:
        self = cls.__new__(cls)
        self.features, self.comparisons, self.num_labels = (
            features,
            comparisons,
            num_labels,
        )
        return self

    @property
    def num_designs(self) -> int:
        r"""``N``, the number of contexts."""
        return self.features.shape[-2]

    @property
    def num_answers(self) -> int:
        r"""``m``."""
        return self.comparisons.shape[0]

    @property
    def answers(self) -> tuple[Tensor, ...]:
        r"""``(comparisons,)``."""
        return (self.comparisons,)

    def select(self, answer_index: Tensor) -> tuple[LabelComparisons, Tensor, Tensor]:
        r"""The answers ``answer_index`` and the contexts they touch (see
        :meth:`PairwiseComparisons.select`)."""
        rows = self.comparisons[answer_index]
        design_index = touched_indices(rows[:, 0])
        (ctx,) = remap_indices(design_index, self.num_designs, rows[:, 0])
        rows = torch.cat([ctx.unsqueeze(-1), rows[:, 1:]], dim=-1)
        data = LabelComparisons._unchecked(
            self.features[..., design_index, :], rows, self.num_labels
        )
        return data, design_index, answer_index

    def __repr__(self) -> str:
        return (
            f"LabelComparisons(features={tuple(self.features.shape)}, "
            f"m={self.comparisons.shape[0]}, num_labels={self.num_labels})"
        )


class Rankings:
    r"""Contexts and one ordering of labels per context, best first.

    Attributes:
        features: A ``batch_shape x N x d`` tensor of contexts.
        orderings: An ``N x r`` long tensor of labels, best first, ``-1``
            padded at the end of a row (partial orderings list a subset).
        num_labels: ``L``.
    """

    def __init__(
        self, features: Tensor, orderings: object, num_labels: int | None = None
    ) -> None:
        r"""
        Args:
            features: A ``batch_shape x N x d`` floating tensor of contexts
                (repeat a row to rank the same context twice).
            orderings: ``N`` orderings of distinct labels, best first: an
                ``N x r`` integer tensor padded with ``-1``, or a ragged
                sequence of sequences.
            num_labels: ``L``; inferred as the largest label + 1 when omitted.
        """
        features = validate_datapoints(features, name="features")
        if num_labels is None:
            upper = 2**62
        else:
            upper = num_labels = check_int("num_labels", num_labels, 2)
        orderings = validate_orderings(orderings, upper)
        if orderings.device != features.device:
            orderings = orderings.to(features.device)
        if num_labels is None:
            num_labels = max(int(orderings.max()) + 1, 2)
        if orderings.shape[0] != features.shape[-2]:
            raise InputDataError(
                f"orderings must have one row per context (N={features.shape[-2]}); "
                f"got {orderings.shape[0]} rows."
            )
        self.features, self.orderings, self.num_labels = features, orderings, num_labels

    @classmethod
    def _unchecked(
        cls, features: Tensor, orderings: Tensor, num_labels: int
    ) -> Rankings:
        self = cls.__new__(cls)
        self.features, self.orderings, self.num_labels = features, orderings, num_labels
        return self

    @property
    def lengths(self) -> Tensor:
        r"""An ``N`` long tensor: the number of labels each ordering lists."""
        return (self.orderings >= 0).sum(-1)

    @property
    def num_designs(self) -> int:
        r"""``N``, the number of contexts."""
        return self.features.shape[-2]

    @property
    def num_answers(self) -> int:
        r"""``N``: one ordering per context."""
        return self.orderings.shape[0]

    @property
    def answers(self) -> tuple[Tensor, ...]:
        r"""``(orderings,)``."""
        return (self.orderings,)

    def to_pairs(self, mode: str = "adjacent") -> LabelComparisons:
        r"""Paired label comparisons implied by the orderings.

        Args:
            mode: ``"adjacent"`` or ``"all"`` pairs of each ordering.

        Returns:
            ``LabelComparisons`` on the same contexts, rows
            ``[context, better label, worse label]`` grouped by context.
        """
        pairs, rows = orderings_to_pairs(self.orderings, mode)
        if pairs.shape[0] == 0:
            raise InputDataError(
                "to_pairs needs at least one ordering of two or more labels; every "
                "ordering lists one."
            )
        comparisons = torch.cat([rows.unsqueeze(-1), pairs], dim=-1)  # m x 3
        return LabelComparisons._unchecked(self.features, comparisons, self.num_labels)

    def select(self, answer_index: Tensor) -> tuple[Rankings, Tensor, Tensor]:
        r"""The orderings ``answer_index`` and their contexts (see
        :meth:`PairwiseComparisons.select`)."""
        orderings = self.orderings[answer_index]
        width = int((orderings >= 0).sum(-1).max())
        data = Rankings._unchecked(
            self.features[..., answer_index, :], orderings[:, :width], self.num_labels
        )
        return data, answer_index, answer_index

    def __repr__(self) -> str:
        return (
            f"Rankings(features={tuple(self.features.shape)}, "
            f"orderings={tuple(self.orderings.shape)}, num_labels={self.num_labels})"
        )
