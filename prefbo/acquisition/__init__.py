r"""Acquisition helpers for preference models (BoTorch's own functions run on
prefbo models unchanged)."""

from prefbo.acquisition.eubo import FastAnalyticEUBO, eubo_values, maximize_eubo
from prefbo.acquisition.thompson import maximize_paths, thompson_batch, thompson_pairs

__all__ = [
    "FastAnalyticEUBO",
    "eubo_values",
    "maximize_eubo",
    "maximize_paths",
    "thompson_batch",
    "thompson_pairs",
]
