r"""prefbo: learning from preferences and choices, and preferential BO.

Built on PyTorch, GPyTorch and BoTorch: every model is a BoTorch ``Model``.
"""

from prefbo.fit import fit_variational
from prefbo.likelihoods import PairwiseLogitLikelihood, PairwiseProbitLikelihood
from prefbo.mlls import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.models import (
    PairwiseEPGP,
    PairwiseLaplaceGP,
    SkewGP,
    VariationalPreferenceGP,
)

__version__ = "0.1.0"

__all__ = [
    "PairwiseEPGP",
    "PairwiseEPMLL",
    "PairwiseLaplaceGP",
    "PairwiseLaplaceMLL",
    "PairwiseLogitLikelihood",
    "PairwiseProbitLikelihood",
    "SkewGP",
    "VariationalPreferenceGP",
    "fit_variational",
    "__version__",
]
