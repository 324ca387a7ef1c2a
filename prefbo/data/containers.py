r"""Containers for preference data, their validation and conversions (SPEC §1).

Four containers, each holding its designs (or contexts) and its answers,
validated once on construction with typed errors that name the argument:

- :class:`PairwiseComparisons`: designs + ``[winner, loser]`` rows, and
  optionally ``[i, j]`` rows of indiscernible pairs;
- :class:`LabelComparisons`: contexts + ``[context, winner label, loser
  label]`` rows;
- :class:`Rankings`: contexts + one ordering of labels per context, best
  first, full or partial, stored ``-1`` padded;
- :class:`ChoiceSets`: designs + ragged option sets and the chosen subset of
  each, stored ``-1`` padded (at the end of a row) with a bool mask.

Answers are never batched (``m x 2``, ``k x s``, ...); designs may carry a
``batch_shape``. Nothing is dropped or merged: duplicated answers count each
time. Every container exposes ``answers`` — the tuple of answer tensors its
likelihood takes after the utilities — and ``select`` for minibatches
(:mod:`prefbo.data.minibatch`).
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import torch
from torch import Tensor

from prefbo.data.validation import validate_comparisons, validate_datapoints
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError

_MODES = ("adjacent", "all")


# --------------------------------------------------------------------------- helpers
def _as_index_tensor(
    x: object,
    name: str,
    upper: int,
    *,
    device: torch.device,
    padding: bool,
    shape_text: str,
) -> Tensor:
    r"""A ``k x s`` long tensor from a tensor or a ragged sequence of sequences."""
    if isinstance(x, Tensor):
        if x.dtype == torch.bool or x.is_complex():
            raise InputTypeError(
                f"{name} must be an integer tensor of indices; got {x.dtype}."
            )
        if x.is_floating_point():
            if not bool((torch.isfinite(x) & (x == x.round())).all()):
                raise InputDataError(
                    f"{name} must hold integer indices; got non-integer values "
                    f"(dtype {x.dtype})."
                )
        if x.device != device:
            raise InputDataError(
                f"{name} must be on the designs' device {device}; got {x.device}."
            )
        out = x.long()
    elif isinstance(x, Sequence) and not isinstance(x, str):
        rows = []
        for i, row in enumerate(x):
            if isinstance(row, Tensor):
                row = row.tolist()
            if not isinstance(row, Sequence) or isinstance(row, str):
                raise InputTypeError(
                    f"{name} must be a {shape_text} tensor or a sequence of sequences "
                    f"of indices; row {i} is {type(row).__name__}."
                )
            if not all(
                isinstance(v, Integral) and not isinstance(v, bool) for v in row
            ):
                raise InputTypeError(
                    f"{name} must hold integer indices; row {i} is {list(row)}."
                )
            rows.append(list(row))
        width = max((len(r) for r in rows), default=0)
        out = torch.full((len(rows), width), -1, dtype=torch.long)
        for i, row in enumerate(rows):
            out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        out = out.to(device)
    else:
        raise InputTypeError(
            f"{name} must be a {shape_text} tensor or a sequence of sequences of "
            f"indices; got {type(x).__name__}."
        )
    if out.ndim != 2:
        raise InputDataError(
            f"{name} must have shape {shape_text}; got {tuple(out.shape)}."
        )
    if out.shape[0] == 0:
        raise InputDataError(
            f"{name} must hold at least one row; got shape {tuple(out.shape)}."
        )
    low = -1 if padding else 0
    if out.numel() > 0 and (int(out.min()) < low or int(out.max()) >= upper):
        pad = " or -1 for padding" if padding else ""
        raise InputDataError(
            f"{name} must hold indices in [0, {upper - 1}]{pad}; got min "
            f"{int(out.min())}, max {int(out.max())}."
        )
    return out


def _check_no_duplicates(x: Tensor, name: str, what: str) -> None:
    ranked = x.sort(-1).values
    dup = (ranked[:, 1:] == ranked[:, :-1]) & (ranked[:, 1:] >= 0)
    if bool(dup.any()):
        row = int(dup.any(-1).nonzero()[0])
        raise InputDataError(
            f"{name} must not repeat {what} within a row; row {row} is "
            f"{x[row].tolist()}."
        )


def _compact(x: Tensor, *others: Tensor) -> tuple[Tensor, ...]:
    r"""Move ``-1`` padding to the end of each row (stable), dropping empty columns."""
    order = (x < 0).long().argsort(dim=-1, stable=True)
    width = int((x >= 0).sum(-1).max())
    return tuple(t.gather(-1, order)[:, :width] for t in (x, *others))


def _remap(design_index: Tensor, num_designs: int, *rows: Tensor) -> tuple[Tensor, ...]:
    r"""Map design indices in ``rows`` to positions in ``design_index`` (-1 kept)."""
    lut = torch.full((num_designs,), -1, dtype=torch.long, device=design_index.device)
    lut[design_index] = torch.arange(design_index.shape[0], device=design_index.device)
    return tuple(torch.where(r >= 0, lut[r.clamp_min(0)], r) for r in rows)


def _touched(*rows: Tensor) -> Tensor:
    flat = torch.cat([r.reshape(-1) for r in rows])
    return torch.unique(flat[flat >= 0])


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise InputDataError(f"mode must be one of {_MODES}; got {mode!r}.")


def validate_orderings(
    orderings: object, upper: int, name: str = "orderings"
) -> Tensor:
    r"""Check orderings, best first, and return them ``-1`` padded.

    Args:
        orderings: A ``k x r`` integer tensor padded with ``-1`` at the end of
            each row, or a sequence of ``k`` sequences (ragged) of indices.
        upper: Indices must lie in ``[0, upper)``.
        name: The argument's name, for messages.

    Returns:
        A ``k x r`` long tensor, ``-1`` padded.
    """
    device = orderings.device if isinstance(orderings, Tensor) else torch.device("cpu")
    out = _as_index_tensor(
        orderings, name, upper, device=device, padding=True, shape_text="k x r"
    )
    valid = out >= 0
    empty = ~valid.any(-1)
    if bool(empty.any()):
        raise InputDataError(
            f"{name} must list at least one item per row; row "
            f"{int(empty.nonzero()[0])} is empty."
        )
    gap = valid[:, 1:] & ~valid[:, :-1]
    if bool(gap.any()):
        row = int(gap.any(-1).nonzero()[0])
        raise InputDataError(
            f"{name} must be padded with -1 at the end of a row only; row {row} is "
            f"{out[row].tolist()}."
        )
    _check_no_duplicates(out, name, "an item")
    return out


def orderings_to_pairs(
    orderings: Tensor, mode: str = "adjacent"
) -> tuple[Tensor, Tensor]:
    r"""Pairs ``[better, worse]`` implied by ``-1``-padded orderings, best first.

    Args:
        orderings: A ``k x r`` long tensor (validated, ``-1`` padded at the end).
        mode: ``"adjacent"`` (``r − 1`` consecutive pairs per ordering) or
            ``"all"`` (all ``r(r − 1)/2`` pairs).

    Returns:
        ``(pairs, rows)``: an ``m x 2`` long tensor of ``[better, worse]`` and
        the ``m`` long tensor of the ordering each pair comes from, grouped by
        ordering, in order of position.
    """
    _check_mode(mode)
    k, r = orderings.shape
    if mode == "adjacent":
        first, second = orderings[:, :-1], orderings[:, 1:]  # k x (r - 1)
    else:
        i, j = torch.triu_indices(r, r, offset=1, device=orderings.device)
        first, second = orderings[:, i], orderings[:, j]  # k x r(r-1)/2
    keep = second >= 0  # the better one is listed whenever the worse one is
    rows = torch.arange(k, device=orderings.device).unsqueeze(-1).expand_as(first)
    return torch.stack([first[keep], second[keep]], dim=-1), rows[keep]


def choices_to_pairs(option_sets: Tensor, chosen: Tensor) -> tuple[Tensor, Tensor]:
    r"""Pairs "the chosen option beats each other option" of top-1 choices.

    Args:
        option_sets: A ``k x s`` long tensor, ``-1`` padded.
        chosen: A ``k x s`` bool tensor with exactly one ``True`` per row.

    Returns:
        ``(pairs, rows)``: an ``m x 2`` long tensor of ``[winner, other]`` and
        the ``m`` long tensor of the set each pair comes from.
    """
    count = chosen.sum(-1)
    if bool((count != 1).any()):
        row = int((count != 1).nonzero()[0])
        raise UnsupportedError(
            "only top-1 choices convert to pairs (the chosen option beats each "
            f"other); set {row} has {int(count[row])} chosen options. Keep such data "
            "as ChoiceSets and use a choice likelihood."
        )
    winners = (option_sets * chosen).sum(-1, keepdim=True)  # k x 1
    losers = (option_sets >= 0) & ~chosen  # k x s
    rows = torch.arange(option_sets.shape[0], device=option_sets.device).unsqueeze(-1)
    pairs = torch.stack(
        [winners.expand_as(option_sets)[losers], option_sets[losers]], -1
    )
    return pairs, rows.expand_as(option_sets)[losers]


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


# ------------------------------------------------------------------------- containers
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
        _check_mode(mode)
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
        design_index = _touched(*rows)
        rows = _remap(design_index, self.num_designs, *rows)
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
        num_labels = _check_num_labels(num_labels)
        big = max(features.shape[-2], num_labels)
        comparisons = _as_index_tensor(
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
        design_index = _touched(rows[:, 0])
        (ctx,) = _remap(design_index, self.num_designs, rows[:, 0])
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


def _check_num_labels(num_labels: object) -> int:
    if (
        isinstance(num_labels, bool)
        or not isinstance(num_labels, int)
        or num_labels < 2
    ):
        raise InputDataError(f"num_labels must be an integer >= 2; got {num_labels!r}.")
    return num_labels


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
            upper = num_labels = _check_num_labels(num_labels)
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
        sets = _as_index_tensor(
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
        _check_no_duplicates(sets, "option_sets", "a design")
        chosen = self._chosen_mask(chosen, sets)
        count = chosen.sum(-1)
        if bool((count == 0).any()):
            raise InputDataError(
                f"chosen must mark at least one option of every set; set "
                f"{int((count == 0).nonzero()[0])} has none."
            )
        self.datapoints = datapoints
        self.option_sets, self.chosen = _compact(sets, chosen)

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
        sets, chosen = _compact(
            self.option_sets[answer_index], self.chosen[answer_index]
        )
        design_index = _touched(sets)
        (sets,) = _remap(design_index, self.num_designs, sets)
        data = ChoiceSets._unchecked(
            self.datapoints[..., design_index, :], sets, chosen
        )
        return data, design_index, answer_index

    def __repr__(self) -> str:
        return (
            f"ChoiceSets(datapoints={tuple(self.datapoints.shape)}, "
            f"option_sets={tuple(self.option_sets.shape)})"
        )
