r"""Inducing-point selection for sparse (variational) GPs.

Allocators are BoTorch ``InducingPointAllocator`` s:

- :class:`ConditionalVarianceReduction` (CVR): greedy MAP of the DPP with the
  kernel, i.e. greedy maximal conditional variance;
- :class:`EntropyDPP` (ENT-DPP): the DPP weighted by information about the
  maximum of the previous model, trade-off ``α``;
- :class:`RandomSubset` and :class:`KMeans` baselines.

:func:`greedy_dpp_map` is the batched, matrix-free greedy underneath.
"""

from prefbo.inducing.allocators import (
    ConditionalVarianceReduction,
    EntropyDPP,
    GreedyDPPAllocator,
)
from prefbo.inducing.baselines import KMeans, RandomSubset
from prefbo.inducing.greedy import default_tolerance, greedy_dpp_map
from prefbo.inducing.max_value import gumbel_max_moments, max_value_information_gain
from prefbo.inducing.quality import (
    MaxValueEntropyQuality,
    QualityFunction,
    UnitQuality,
)

__all__ = [
    "ConditionalVarianceReduction",
    "EntropyDPP",
    "GreedyDPPAllocator",
    "KMeans",
    "MaxValueEntropyQuality",
    "QualityFunction",
    "RandomSubset",
    "UnitQuality",
    "default_tolerance",
    "gumbel_max_moments",
    "greedy_dpp_map",
    "max_value_information_gain",
]
