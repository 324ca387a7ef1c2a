r"""Orderings and top-1 choices as pairwise comparisons.

A ranking, best first, implies the pairs ``[better, worse]`` between its
items (``"adjacent"``: consecutive items only; ``"all"``: every pair); a
top-1 choice implies that the chosen option beats each other option of its
set. Inputs are ``-1`` padded index tensors; each pair comes with the row
(ordering or set) it comes from.
"""

from __future__ import annotations

import torch
from torch import Tensor

from prefbo.data.indices import as_index_tensor, check_no_duplicates
from prefbo.exceptions import InputDataError, UnsupportedError

PAIR_MODES = ("adjacent", "all")


def check_pair_mode(mode: str) -> None:
    r"""Raise unless ``mode`` is one of :data:`PAIR_MODES`."""
    if mode not in PAIR_MODES:
        raise InputDataError(f"mode must be one of {PAIR_MODES}; got {mode!r}.")


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
    out = as_index_tensor(
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
    check_no_duplicates(out, name, "an item")
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
    check_pair_mode(mode)
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
