r"""Choice sets: designs, option sets and the chosen subset of each.

:class:`ChoiceSets` holds ``batch_shape x n x d`` designs and ``k`` ragged
sets of options, stored as a ``k x s`` index tensor ``-1`` padded at the end
of a row with a bool mask, and the chosen subset of each set (top-1 or
larger). Top-1 choices convert to the pairwise comparisons they imply.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from prefbo.data.conversions import choices_to_pairs
from prefbo.data.indices import (
    as_index_tensor,
    check_no_duplicates,
    compact_padding,
    remap_indices,
    touched_indices,
)
from prefbo.data.pairwise import PairwiseComparisons
from prefbo.data.validation import validate_datapoints
from prefbo.exceptions import InputDataError, InputTypeError


class ChoiceSets:
    r"""Designs, option sets and the chosen subset of each.

    Attributes:
        datapoints: A ``batch_shape x n x d`` tensor of designs.
        option_sets: A ``k x s`` long tensor of design indices, ``-1`` padded
            at the end of a row.
        chosen: A ``k x s`` bool tensor marking the chosen options.
        mask: A ``k x s`` bool tensor, ``True`` on real (non-padding) options.
    """

    def __init__(self, datapoints: Tensor, option_sets: object, chosen: object) -> None:
        r"""
        Args:
            datapoints: A ``batch_shape x n x d`` floating tensor of designs.
            option_sets: ``k`` sets of distinct design indices: a ``k x s``
                integer tensor padded with ``-1`` (anywhere), or a ragged
                sequence of sequences.
            chosen: The chosen subsets: a ``k x s`` bool tensor aligned with a
                tensor ``option_sets``, or a sequence of ``k`` sequences of
                design indices, each a non-empty subset of its set.
        """
        datapoints = validate_datapoints(datapoints)
        n, device = datapoints.shape[-2], datapoints.device
        if isinstance(option_sets, Tensor) and option_sets.device != device:
            raise InputDataError(
                f"option_sets must be on the designs' device {device}; got "
                f"{option_sets.device}."
            )
        sets = as_index_tensor(
            option_sets,
            "option_sets",
            n,
            device=device,
            padding=True,
            shape_text="k x s",
        )
        empty = ~(sets >= 0).any(-1)
        if bool(empty.any()):
            raise InputDataError(
                f"option_sets must hold at least one option per set; set "
                f"{int(empty.nonzero()[0])} is empty."
            )
        check_no_duplicates(sets, "option_sets", "a design")
        chosen = self._chosen_mask(chosen, sets)
        count = chosen.sum(-1)
        if bool((count == 0).any()):
            raise InputDataError(
                f"chosen must mark at least one option of every set; set "
                f"{int((count == 0).nonzero()[0])} has none."
            )
        self.datapoints = datapoints
        self.option_sets, self.chosen = compact_padding(sets, chosen)

    @staticmethod
    def _chosen_mask(chosen: object, sets: Tensor) -> Tensor:
        if isinstance(chosen, Tensor):
            if chosen.dtype != torch.bool:
                raise InputTypeError(
                    "chosen must be a k x s bool tensor (or a sequence of sequences "
                    f"of chosen design indices); got {chosen.dtype}."
                )
            if chosen.shape != sets.shape:
                raise InputDataError(
                    f"chosen must have option_sets' shape {tuple(sets.shape)}; got "
                    f"{tuple(chosen.shape)}."
                )
            chosen = chosen.to(sets.device)
            bad = chosen & (sets < 0)
            if bool(bad.any()):
                raise InputDataError(
                    "chosen must be False on padding (-1) entries of option_sets; set "
                    f"{int(bad.any(-1).nonzero()[0])} marks padding as chosen."
                )
            return chosen
        if not isinstance(chosen, Sequence) or len(chosen) != sets.shape[0]:
            raise InputTypeError(
                "chosen must be a k x s bool tensor or a sequence of k sequences of "
                f"design indices (k={sets.shape[0]}); got {type(chosen).__name__}"
                + (f" of length {len(chosen)}" if isinstance(chosen, Sequence) else "")
                + "."
            )
        mask = torch.zeros_like(sets, dtype=torch.bool)
        for i, picks in enumerate(chosen):
            picks = picks.tolist() if isinstance(picks, Tensor) else picks
            if isinstance(picks, str | bytes) or not isinstance(picks, Sequence):
                raise InputTypeError(
                    f"chosen[{i}] must be a sequence of design indices (one "
                    f"sequence per set, e.g. [[0], [2]]); got {picks!r}."
                )
            if len(set(picks)) != len(picks):
                raise InputDataError(
                    f"chosen[{i}] lists a design more than once; got {list(picks)}."
                )
            members = sets[i].tolist()
            for p in picks:
                if isinstance(p, bool) or not isinstance(p, int):
                    raise InputTypeError(
                        f"chosen[{i}] must hold int design indices; got {p!r}."
                    )
                if p not in members or p < 0:
                    raise InputDataError(
                        f"chosen must be subsets of their option sets; set {i} is "
                        f"{[v for v in members if v >= 0]} but chosen lists {p}."
                    )
                mask[i, members.index(p)] = True
        return mask

    @classmethod
    def _unchecked(
        cls, datapoints: Tensor, option_sets: Tensor, chosen: Tensor
    ) -> ChoiceSets:
        self = cls.__new__(cls)
        self.datapoints, self.option_sets, self.chosen = datapoints, option_sets, chosen
        return self

    @property
    def mask(self) -> Tensor:
        r"""A ``k x s`` bool tensor, ``True`` on real options."""
        return self.option_sets >= 0

    @property
    def num_designs(self) -> int:
        r"""``n``, the number of designs."""
        return self.datapoints.shape[-2]

    @property
    def num_answers(self) -> int:
        r"""``k``, the number of choices."""
        return self.option_sets.shape[0]

    @property
    def answers(self) -> tuple[Tensor, ...]:
        r"""``(option_sets, chosen)``."""
        return (self.option_sets, self.chosen)

    def to_pairs(self) -> PairwiseComparisons:
        r"""Top-1 choices as pairs: the chosen option beats each other option.

        Returns:
            ``PairwiseComparisons`` on the same designs, grouped by set.
        """
        pairs, _ = choices_to_pairs(self.option_sets, self.chosen)
        if pairs.shape[0] == 0:
            raise InputDataError(
                "to_pairs needs at least one set with two or more options; every set "
                "has one."
            )
        return PairwiseComparisons._unchecked(self.datapoints, pairs, None)

    def select(self, answer_index: Tensor) -> tuple[ChoiceSets, Tensor, Tensor]:
        r"""The choices ``answer_index`` and the designs they touch (see
        :meth:`PairwiseComparisons.select`)."""
        sets, chosen = compact_padding(
            self.option_sets[answer_index], self.chosen[answer_index]
        )
        design_index = touched_indices(sets)
        (sets,) = remap_indices(design_index, self.num_designs, sets)
        data = ChoiceSets._unchecked(
            self.datapoints[..., design_index, :], sets, chosen
        )
        return data, design_index, answer_index

    def __repr__(self) -> str:
        return (
            f"ChoiceSets(datapoints={tuple(self.datapoints.shape)}, "
            f"option_sets={tuple(self.option_sets.shape)})"
        )
