r"""Fitting routines for prefbo's models that are not fit by an exact MLL, and
optimiser bounds for those that are."""

from prefbo.fit.bounds import box_prior_bounds
from prefbo.fit.scipy_log import fit_mll_scipy
from prefbo.fit.variational import VariationalFitResult, fit_variational

__all__ = [
    "VariationalFitResult",
    "box_prior_bounds",
    "fit_mll_scipy",
    "fit_variational",
]
