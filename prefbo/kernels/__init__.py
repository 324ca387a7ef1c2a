r"""Kernels for preference models."""

from prefbo.kernels.defaults import default_preference_covar_module
from prefbo.kernels.pairs import (
    NonTransitivePreferenceKernel,
    PreferenceKernel,
    concatenate_pairs,
)
from prefbo.kernels.population import POPULATION, PopulationKernel

__all__ = [
    "POPULATION",
    "NonTransitivePreferenceKernel",
    "PopulationKernel",
    "PreferenceKernel",
    "concatenate_pairs",
    "default_preference_covar_module",
]
