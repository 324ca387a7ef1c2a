r"""GPyTorch likelihoods for preference and choice data."""

from prefbo.likelihoods.base import AnswerIndex, PreferenceLikelihood
from prefbo.likelihoods.choice import (
    ChoiceLikelihood,
    PseudoRationalChoiceLikelihood,
    RationalChoiceLikelihood,
)
from prefbo.likelihoods.difference import DifferenceLikelihood
from prefbo.likelihoods.jnd import JustNoticeableDifferenceLikelihood
from prefbo.likelihoods.labels import (
    PairedLabelLikelihood,
    PlackettLuceLikelihood,
    ThurstoneRankingLikelihood,
)
from prefbo.likelihoods.pairwise import (
    PairwiseLikelihood,
    PairwiseLogitLikelihood,
    PairwiseProbitLikelihood,
    as_prefbo_likelihood,
    pairwise_expected_log_prob,
)
from prefbo.likelihoods.pareto import ParetoPreferenceLikelihood
from prefbo.likelihoods.quadrature import (
    difference_moments,
    latent_moments,
)

__all__ = [
    "AnswerIndex",
    "ChoiceLikelihood",
    "DifferenceLikelihood",
    "JustNoticeableDifferenceLikelihood",
    "PairedLabelLikelihood",
    "PairwiseLikelihood",
    "PairwiseLogitLikelihood",
    "PairwiseProbitLikelihood",
    "ParetoPreferenceLikelihood",
    "PlackettLuceLikelihood",
    "PreferenceLikelihood",
    "PseudoRationalChoiceLikelihood",
    "RationalChoiceLikelihood",
    "ThurstoneRankingLikelihood",
    "as_prefbo_likelihood",
    "difference_moments",
    "latent_moments",
    "pairwise_expected_log_prob",
]
