r"""Fitting routines for prefbo's models that are not fit by an exact MLL
(:func:`fit_variational`, data-parallel too). The exact MLLs' L-BFGS-B fit and
its bounds live in :mod:`prefbo.mlls` and are re-exported here."""

from prefbo.fit.variational import VariationalFitResult, fit_variational
from prefbo.mlls.bounds import box_prior_bounds
from prefbo.mlls.scipy_log import fit_mll_scipy

__all__ = [
    "VariationalFitResult",
    "box_prior_bounds",
    "fit_mll_scipy",
    "fit_variational",
]
