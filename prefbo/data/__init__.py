r"""Containers, validation and conversions for preference data."""

from prefbo.data.validation import (
    validate_comparisons,
    validate_datapoints,
    validate_pairwise_data,
)

__all__ = ["validate_comparisons", "validate_datapoints", "validate_pairwise_data"]
