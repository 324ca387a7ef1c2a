r"""Marginal log likelihoods (evidence) of the pairwise models, and their fit.

:class:`PairwiseLaplaceMLL` (alias :class:`PairwiseEPMLL`) is what
``botorch.fit.fit_gpytorch_mll`` fits; :func:`fit_mll_scipy` is the L-BFGS-B
fit in log coordinates that the pairwise models' ``custom_fit`` runs, with
box-prior hyperparameters bounded to their box (:func:`box_prior_bounds`).
"""

from prefbo.mlls.bounds import box_prior_bounds
from prefbo.mlls.laplace import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.mlls.scipy_log import fit_mll_scipy

__all__ = ["PairwiseEPMLL", "PairwiseLaplaceMLL", "box_prior_bounds", "fit_mll_scipy"]
