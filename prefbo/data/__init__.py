r"""Containers, validation and conversions for preference data."""

from prefbo.data.containers import (
    ChoiceSets,
    LabelComparisons,
    PairwiseComparisons,
    Rankings,
    choices_to_pairs,
    orderings_to_pairs,
    validate_orderings,
)
from prefbo.data.graph import comparison_graph_summary
from prefbo.data.minibatch import AnswerLoader, Minibatch, iter_minibatches
from prefbo.data.validation import (
    validate_comparisons,
    validate_datapoints,
    validate_pairwise_data,
)

__all__ = [
    "AnswerLoader",
    "ChoiceSets",
    "LabelComparisons",
    "Minibatch",
    "PairwiseComparisons",
    "Rankings",
    "choices_to_pairs",
    "comparison_graph_summary",
    "iter_minibatches",
    "orderings_to_pairs",
    "validate_comparisons",
    "validate_datapoints",
    "validate_orderings",
    "validate_pairwise_data",
]
