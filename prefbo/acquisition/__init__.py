r"""Acquisition helpers for preference models (BoTorch's own functions run on
prefbo models unchanged)."""

from prefbo.acquisition.bald import PairwiseBALD
from prefbo.acquisition.eubo import FastAnalyticEUBO, eubo_values
from prefbo.acquisition.eubo_maximizer import maximize_eubo
from prefbo.acquisition.gen import gen_candidates_eubo
from prefbo.acquisition.pair_moments import (
    GetPairMoments,
    KernelPairMoments,
    PairMoments,
    pair_moments,
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
    "pair_moments",
    "thompson_batch",
    "thompson_pairs",
]
