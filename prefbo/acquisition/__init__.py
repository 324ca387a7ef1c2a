r"""Acquisition helpers for preference models (BoTorch's own functions run on
prefbo models unchanged)."""

from prefbo.acquisition.eubo import eubo_values, maximize_eubo
from prefbo.acquisition.thompson import maximize_paths, thompson_batch, thompson_pairs

__all__ = [
    "eubo_values",
    "maximize_eubo",
    "maximize_paths",
    "thompson_batch",
    "thompson_pairs",
]
