r"""Acquisition helpers for preference models (BoTorch's own functions run on
prefbo models unchanged).

The posterior moments of pairs that EUBO and BALD read come from the module
:mod:`prefbo.acquisition.pair_moments` (``pair_moments.pair_moments(model)``);
a model class of one's own registers its moments with :data:`GetPairMoments`.
"""

from prefbo.acquisition.bald import PairwiseBALD
from prefbo.acquisition.eubo import FastAnalyticEUBO, eubo_values
from prefbo.acquisition.eubo_maximizer import maximize_eubo
from prefbo.acquisition.gen import gen_candidates_eubo
from prefbo.acquisition.pair_moments import (
    GetPairMoments,
    KernelPairMoments,
    PairMoments,
)
from prefbo.acquisition.thompson import maximize_paths, thompson_batch, thompson_pairs

__all__ = [
    "FastAnalyticEUBO",
    "GetPairMoments",
    "KernelPairMoments",
    "PairMoments",
    "PairwiseBALD",
    "eubo_values",
    "gen_candidates_eubo",
    "maximize_eubo",
    "maximize_paths",
    "thompson_batch",
    "thompson_pairs",
]
