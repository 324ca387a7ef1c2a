r"""Fitting routines for prefbo's models that are not fit by an exact MLL."""

from prefbo.fit.variational import VariationalFitResult, fit_variational

__all__ = ["VariationalFitResult", "fit_variational"]
