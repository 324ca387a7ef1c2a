r"""Sample-based posterior of the exact skew-GP model.

The utility at test points is ``f* = K(X*, X) w + r0`` where ``w`` comes from a
stored draw of the exact posterior (one row of ``weights``) and ``r0`` is an
independent Gaussian with covariance ``K** - K(X*, X) Q K(X, X*)``. The
posterior keeps the ``S`` location vectors ``K(X*, X) w_s`` and the residual
covariance; a sample uses location ``s = i mod S`` (after a fixed random
permutation) plus a Gaussian residual from the base samples, so BoTorch's QMC
samplers and MC acquisition functions (qEUBO, qNEI, …) run unchanged.
"""

from __future__ import annotations

import torch
from botorch.posteriors.posterior import Posterior
from botorch.sampling.get_sampler import GetSampler
from botorch.sampling.normal import SobolQMCNormalSampler
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor


class SkewGPPosterior(Posterior):
    r"""Posterior over ``batch_shape x q`` utilities from stored exact draws.

    Args:
        locations: ``S x batch_shape x q`` location part of each stored draw.
        residual_covariance: ``batch_shape x q x q`` covariance of the Gaussian
            residual shared by all draws.
        generator_seed: Seed of the fixed permutation of the stored draws.
    """

    def __init__(
        self, locations: Tensor, residual_covariance: Tensor, generator_seed: int = 0
    ) -> None:
        self.locations = locations
        self.residual_covariance = residual_covariance
        g = torch.Generator().manual_seed(generator_seed)
        self._order = torch.randperm(locations.shape[0], generator=g).to(
            locations.device
        )
        self._root: Tensor | None = None

    @property
    def num_draws(self) -> int:
        r"""``S``, the number of stored exact draws."""
        return self.locations.shape[0]

    @property
    def device(self) -> torch.device:  # noqa: D102
        return self.locations.device

    @property
    def dtype(self) -> torch.dtype:  # noqa: D102
        return self.locations.dtype

    @property
    def base_sample_shape(self) -> torch.Size:
        r"""``batch_shape x q x 1``: one standard normal per output for ``r0``."""
        return self.locations.shape[1:] + (1,)

    @property
    def batch_range(self) -> tuple[int, int]:  # noqa: D102
        return (0, -2)

    def _extended_shape(self, sample_shape: torch.Size = torch.Size()) -> torch.Size:
        return sample_shape + self.base_sample_shape

    def _residual_root(self) -> Tensor:
        if self._root is None:
            self._root = psd_safe_cholesky(self.residual_covariance)
        return self._root

    @property
    def mean(self) -> Tensor:
        r"""``batch_shape x q x 1`` posterior mean (average of the draws)."""
        return self.locations.mean(0).unsqueeze(-1)

    @property
    def covariance_matrix(self) -> Tensor:
        r"""``batch_shape x q x q`` covariance of the draws plus the residual."""
        loc = self.locations - self.locations.mean(0)
        emp = torch.einsum("s...i,s...j->...ij", loc, loc) / max(self.num_draws - 1, 1)
        return emp + self.residual_covariance

    @property
    def variance(self) -> Tensor:
        r"""``batch_shape x q x 1`` marginal variances."""
        return self.covariance_matrix.diagonal(dim1=-2, dim2=-1).unsqueeze(-1)

    def rsample_from_base_samples(
        self, sample_shape: torch.Size, base_samples: Tensor
    ) -> Tensor:
        r"""Draws ``sample_shape x batch_shape x q x 1`` from standard normals.

        Draw ``i`` (in the flattened ``sample_shape``) takes the stored
        location ``order[i mod S]`` and the residual ``L ε_i``.
        """
        expected = self._extended_shape(sample_shape)
        if base_samples.shape[: len(sample_shape)] != sample_shape:
            raise RuntimeError(
                f"base_samples must start with sample_shape {tuple(sample_shape)}; "
                f"got {tuple(base_samples.shape)}."
            )
        base_samples = base_samples.expand(expected)
        n = sample_shape.numel()
        idx = self._order[torch.arange(n, device=self.device) % self.num_draws]
        loc = self.locations[idx].reshape(sample_shape + self.locations.shape[1:])
        resid = (self._residual_root() @ base_samples).squeeze(-1)
        return (loc + resid).unsqueeze(-1)

    def rsample(self, sample_shape: torch.Size | None = None) -> Tensor:
        r"""Draws with fresh standard normal residuals."""
        sample_shape = torch.Size() if sample_shape is None else sample_shape
        base = torch.randn(
            self._extended_shape(sample_shape), dtype=self.dtype, device=self.device
        )
        return self.rsample_from_base_samples(sample_shape, base)


@GetSampler.register(SkewGPPosterior)
def _get_sampler_skew_gp(
    posterior: SkewGPPosterior, sample_shape: torch.Size, *, seed: int | None = None
) -> SobolQMCNormalSampler:
    r"""QMC normal base samples for the Gaussian residual of each draw."""
    return SobolQMCNormalSampler(sample_shape=sample_shape, seed=seed)
