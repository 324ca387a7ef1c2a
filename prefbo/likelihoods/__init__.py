r"""GPyTorch likelihoods for preference and choice data."""

from prefbo.likelihoods.pairwise import (
    PairwiseLikelihood,
    PairwiseLogitLikelihood,
    PairwiseProbitLikelihood,
    as_prefbo_likelihood,
)

__all__ = [
    "PairwiseLikelihood",
    "PairwiseLogitLikelihood",
    "PairwiseProbitLikelihood",
    "as_prefbo_likelihood",
]
