r"""Many users at once: ragged per-user data padded into one batch.

One preference model per user, refitted after every answer, is naturally a
batch: :func:`batch_users` pads designs and comparisons of users with different
``n`` and ``m`` to common sizes and returns the masks that
:class:`~prefbo.models.PairwiseLaplaceGP` and :class:`~prefbo.models.PairwiseEPGP`
take (``design_mask``, ``comparison_mask``). Padding designs get an independent
``N(0, 1)`` prior uncoupled from the real ones and padding comparisons carry no
information, so each user's posterior, evidence and fitted hyperparameters
(one set per batch element) equal a separate fit on that user's data alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from prefbo.data.validation import validate_pairwise_data
from prefbo.exceptions import InputDataError


@dataclass
class RaggedBatch:
    r"""Padded per-user data.

    Attributes:
        datapoints: ``B x n_max x d`` designs (padding rows are zeros).
        comparisons: ``B x m_max x 2`` comparisons (padding rows ``[0, 0]``).
        design_mask: ``B x n_max`` bool, True for real designs.
        comparison_mask: ``B x m_max`` bool, True for real comparisons.
    """

    datapoints: Tensor
    comparisons: Tensor
    design_mask: Tensor
    comparison_mask: Tensor

    def model_kwargs(self) -> dict:
        r"""Keyword arguments for a pairwise model's constructor."""
        return {
            "datapoints": self.datapoints,
            "comparisons": self.comparisons,
            "design_mask": self.design_mask,
            "comparison_mask": self.comparison_mask,
        }


def batch_users(datasets: list[tuple[Tensor, Tensor]]) -> RaggedBatch:
    r"""Pad ``[(datapoints_u, comparisons_u), …]`` of ``B`` users into one batch.

    Args:
        datasets: One ``(n_u x d designs, m_u x 2 comparisons)`` pair per user,
            same ``d``, dtype and device.

    Returns:
        A :class:`RaggedBatch`; ``PairwiseLaplaceGP(**batch.model_kwargs())``
        fits all users in one batched call.
    """
    if not isinstance(datasets, (list, tuple)) or len(datasets) == 0:
        raise InputDataError(
            "datasets must be a non-empty list of (datapoints, comparisons) pairs; "
            f"got {type(datasets).__name__} of length "
            f"{len(datasets) if hasattr(datasets, '__len__') else 'n/a'}."
        )
    checked = []
    for u, pair in enumerate(datasets):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise InputDataError(
                f"datasets[{u}] must be a (datapoints, comparisons) pair; got "
                f"{type(pair).__name__}."
            )
        X, C = validate_pairwise_data(*pair)
        if X.ndim != 2:
            raise InputDataError(
                f"datasets[{u}] must be unbatched (n x d, m x 2); got datapoints of "
                f"shape {tuple(X.shape)}."
            )
        checked.append((X, C))
    d = checked[0][0].shape[-1]
    ref = checked[0][0]
    for u, (X, _) in enumerate(checked):
        if X.shape[-1] != d or X.dtype != ref.dtype or X.device != ref.device:
            raise InputDataError(
                f"datasets[{u}] must have d={d} features, dtype {ref.dtype} and device "
                f"{ref.device}; got d={X.shape[-1]}, {X.dtype}, {X.device}."
            )
    B = len(checked)
    n_max = max(X.shape[0] for X, _ in checked)
    m_max = max(C.shape[0] for _, C in checked)
    X_all = ref.new_zeros(B, n_max, d)
    C_all = torch.zeros(B, m_max, 2, dtype=torch.long, device=ref.device)
    dmask = torch.zeros(B, n_max, dtype=torch.bool, device=ref.device)
    cmask = torch.zeros(B, m_max, dtype=torch.bool, device=ref.device)
    for u, (X, C) in enumerate(checked):
        X_all[u, : X.shape[0]] = X
        C_all[u, : C.shape[0]] = C
        dmask[u, : X.shape[0]] = True
        cmask[u, : C.shape[0]] = True
    return RaggedBatch(X_all, C_all, dmask, cmask)
