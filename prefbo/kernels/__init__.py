r"""Kernels for preference models."""

from prefbo.kernels.defaults import default_preference_covar_module

__all__ = ["default_preference_covar_module"]
