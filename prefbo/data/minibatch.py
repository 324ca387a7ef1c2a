r"""Minibatches over answers for stochastic variational inference.

The ELBO of a sparse variational preference GP (SVGP, Hensman, Matthews &
Ghahramani 2015) sums over answers, so minibatches are drawn over answers;
each answer touches a few designs, and a minibatch carries only the designs
its answers touch (unique, sorted) with the answers' indices remapped into
them. The model evaluates ``q(f)`` at
``batch.data.datapoints`` (``u`` rows instead of ``n``) and scales the
batch's summed expected log-likelihood by ``batch.scale``.

Example (what :func:`~prefbo.fit.fit_variational` does)::

    loader = AnswerLoader(data, batch_size=256, generator=g)
    for batch in loader:
        # q(f) of each answer's latents, gathered at the u designs it touches
        ell = model.expected_log_likelihood(batch.data)  # b answers
        loss = -(batch.scale * ell.sum() - model.kl_divergence())

(``model(batch.data.datapoints)`` would not do: in training mode GPyTorch's
variational strategy returns only the marginal variances, while an answer
needs the joint covariance of the latents it compares;
:meth:`~prefbo.models.VariationalPreferenceGP.answer_moments` gathers it.)
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from prefbo.data.containers import (
    ChoiceSets,
    LabelComparisons,
    PairwiseComparisons,
    Rankings,
)
from prefbo.exceptions import InputTypeError
from prefbo.utils.checks import check_int

PreferenceData = PairwiseComparisons | LabelComparisons | Rankings | ChoiceSets


@dataclass(frozen=True)
class Minibatch:
    r"""A minibatch of answers and the designs they touch.

    Attributes:
        data: A container of the same type as the full data, holding the
            batch's ``b`` answers with design indices remapped into its ``u``
            designs (``data.datapoints`` / ``data.features`` are
            ``batch_shape x u x d``).
        design_index: A ``u`` long tensor: ``data``'s designs are the full
            data's designs ``design_index`` (sorted, unique; for
            :class:`Rankings` the contexts of the batch's orderings).
        answer_index: A ``b`` long tensor: answer ``j`` of ``data`` is answer
            ``answer_index[j]`` of the full data.
        scale: ``num_answers / b``, the factor that makes the batch's summed
            expected log-likelihood an unbiased estimate of the full sum.
    """

    data: PreferenceData
    design_index: Tensor
    answer_index: Tensor
    scale: float


class AnswerLoader:
    r"""Iterate over minibatches of answers, reshuffled at every pass.

    ``len(loader)`` is the number of minibatches per pass; each ``iter``
    is a fresh pass (a new permutation when ``shuffle``).
    """

    def __init__(
        self,
        data: PreferenceData,
        batch_size: int,
        *,
        shuffle: bool = True,
        drop_last: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        r"""
        Args:
            data: A :class:`PairwiseComparisons`, :class:`LabelComparisons`,
                :class:`Rankings` or :class:`ChoiceSets`.
            batch_size: Answers per minibatch.
            shuffle: Draw a random permutation of the answers at each pass
                (else in order).
            drop_last: Drop a final minibatch smaller than ``batch_size``.
            generator: A CPU ``torch.Generator`` for the permutations
                (reproducible passes).
        """
        if not isinstance(
            data, PairwiseComparisons | LabelComparisons | Rankings | ChoiceSets
        ):
            raise InputTypeError(
                "data must be a PairwiseComparisons, LabelComparisons, Rankings or "
                f"ChoiceSets; got {type(data).__name__}."
            )
        self.data = data
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.generator = generator

    def __len__(self) -> int:
        total = self.data.num_answers
        if self.drop_last:
            return total // self.batch_size
        return math.ceil(total / self.batch_size)

    def __iter__(self) -> Iterator[Minibatch]:
        total = self.data.num_answers
        if self.shuffle:
            order = torch.randperm(total, generator=self.generator)
        else:
            order = torch.arange(total)
        device = self.data.answers[0].device
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            rows = order[start : start + self.batch_size].to(device)
            sub, design_index, answer_index = self.data.select(rows)
            yield Minibatch(sub, design_index, answer_index, total / rows.shape[0])


def iter_minibatches(
    data: PreferenceData,
    batch_size: int,
    *,
    shuffle: bool = True,
    drop_last: bool = False,
    generator: torch.Generator | None = None,
) -> Iterator[Minibatch]:
    r"""One pass of minibatches over ``data``'s answers.

    Args:
        data: A prefbo preference-data container.
        batch_size: Answers per minibatch.
        shuffle: Randomly permute the answers first.
        drop_last: Drop a final minibatch smaller than ``batch_size``.
        generator: A CPU ``torch.Generator`` for the permutation.

    Returns:
        An iterator of :class:`Minibatch`.
    """
    return iter(
        AnswerLoader(
            data, batch_size, shuffle=shuffle, drop_last=drop_last, generator=generator
        )
    )
