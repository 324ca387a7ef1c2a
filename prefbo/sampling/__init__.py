r"""Samplers of linearly truncated Gaussians (the exact skew-GP posterior).

:class:`LinESS` (rejection-free linear elliptical slice sampling) and
:class:`GibbsSampler` (coordinate-wise exact conditionals) both sample
``N(mean, covariance)`` restricted to ``{x : A x ≤ b}`` with many chains in
parallel; ``draw(n)`` returns ``n x num_chains x d``.
"""

from prefbo.sampling.base import (
    InfeasibleConstraintsError,
    TruncatedGaussianSampler,
    find_interior_point,
)
from prefbo.sampling.gibbs import (
    GibbsSampler,
    ndtri_exp,
    sample_standard_normal_below,
    sample_truncated_standard_normal,
)
from prefbo.sampling.lin_ess import LinESS
from prefbo.sampling.pathwise import (
    VariationalPreferencePath,
    draw_pairwise_paths,
    draw_variational_paths,
)

__all__ = [
    "GibbsSampler",
    "InfeasibleConstraintsError",
    "LinESS",
    "TruncatedGaussianSampler",
    "VariationalPreferencePath",
    "draw_pairwise_paths",
    "draw_variational_paths",
    "find_interior_point",
    "ndtri_exp",
    "sample_standard_normal_below",
    "sample_truncated_standard_normal",
]
