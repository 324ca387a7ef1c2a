r"""The four containers of preference data, and their conversions to pairs.

Each container holds its designs (or contexts) and its answers, validated
once on construction with typed errors that name the argument:

- :class:`~prefbo.data.pairwise.PairwiseComparisons`: designs +
  ``[winner, loser]`` rows, and optionally ``[i, j]`` rows of indiscernible
  pairs;
- :class:`~prefbo.data.labels.LabelComparisons`: contexts + ``[context,
  winner label, loser label]`` rows;
- :class:`~prefbo.data.labels.Rankings`: contexts + one ordering of labels per
  context, best first, full or partial, stored ``-1`` padded;
- :class:`~prefbo.data.choices.ChoiceSets`: designs + ragged option sets and
  the chosen subset of each, stored ``-1`` padded (at the end of a row) with a
  bool mask.

Answers are never batched (``m x 2``, ``k x s``, ...); designs may carry a
``batch_shape``. Nothing is dropped or merged: duplicated answers count each
time. Every container exposes ``num_designs``, ``num_answers``, ``answers``
(the tuple of answer tensors its likelihood takes after the utilities) and
``select`` for minibatches (:mod:`prefbo.data.minibatch`).

This module gathers them in one place; each lives in the module of its kind
of answer, the conversions in :mod:`prefbo.data.conversions`.
"""

from prefbo.data.choices import ChoiceSets
from prefbo.data.conversions import (
    choices_to_pairs,
    orderings_to_pairs,
    validate_orderings,
)
from prefbo.data.labels import LabelComparisons, Rankings
from prefbo.data.pairwise import PairwiseComparisons

__all__ = [
    "ChoiceSets",
    "LabelComparisons",
    "PairwiseComparisons",
    "Rankings",
    "choices_to_pairs",
    "orderings_to_pairs",
    "validate_orderings",
]
