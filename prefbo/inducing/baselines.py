r"""Baseline inducing-point allocators: a uniform random subset and k-means.

Both ignore the kernel (BoTorch's ``InducingPointAllocator`` interface passes
it) and are batched over leading dimensions of the inputs.
"""

from __future__ import annotations

import torch
from botorch.models.utils.inducing_point_allocators import InducingPointAllocator
from gpytorch.kernels import Kernel
from torch import Tensor

from prefbo.inducing.allocators import broadcast_inputs
from prefbo.inducing.quality import QualityFunction, UnitQuality
from prefbo.utils.checks import check_int, check_seed


def _generator(seed: int | None) -> torch.Generator | None:
    return None if seed is None else torch.Generator().manual_seed(seed)


def _uniform(shape: torch.Size, like: Tensor, gen: torch.Generator | None) -> Tensor:
    r"""Uniforms drawn on the CPU (for a seeded generator), moved to ``like``."""
    return torch.rand(shape, generator=gen, dtype=like.dtype).to(like.device)


class RandomSubset(InducingPointAllocator):
    r"""``m`` inputs drawn uniformly without replacement, per batch element."""

    def __init__(self, seed: int | None = None) -> None:
        r"""
        Args:
            seed: Seed of a private CPU generator; ``None`` uses torch's global
                RNG.

        Raises:
            InputTypeError: ``seed`` is not an int or ``None``.
            InputDataError: ``seed`` is outside what a ``torch.Generator`` takes.
        """
        self.seed = check_seed("seed", seed, allow_none=True)

    def _get_quality_function(self) -> QualityFunction:
        r"""Unused (required by BoTorch's interface)."""
        return UnitQuality()

    def allocate_inducing_points(
        self,
        inputs: Tensor,
        covar_module: Kernel | None,
        num_inducing: int,
        input_batch_shape: torch.Size = torch.Size(),
    ) -> Tensor:
        r"""Draw a random subset of the inputs.

        Args:
            inputs: A ``batch_shape x n x d`` tensor.
            covar_module: Ignored.
            num_inducing: Number ``m ≤ n`` of points.
            input_batch_shape: The model's input batch shape.

        Returns:
            A ``batch_shape' x m x d`` tensor of distinct inputs.
        """
        inputs = broadcast_inputs(inputs, input_batch_shape, num_inducing)
        keys = _uniform(inputs.shape[:-1], inputs, _generator(self.seed))  # batch x n
        idx = keys.topk(num_inducing, dim=-1).indices  # batch x m
        return inputs.gather(
            -2, idx.unsqueeze(-1).expand(idx.shape + inputs.shape[-1:])
        )


class KMeans(InducingPointAllocator):
    r"""k-means centroids of the inputs (k-means++ seeding, then Lloyd).

    Euclidean distance on the raw inputs (scale them first if the features
    differ in scale). Lloyd iterations stop when no assignment changes or
    after ``num_iters``; a cluster that empties keeps its previous centroid.
    The centroids are generally not inputs.
    """

    def __init__(self, num_iters: int = 25, seed: int | None = None) -> None:
        r"""
        Args:
            num_iters: Maximum number of Lloyd iterations (``≥ 0``).
            seed: Seed of a private CPU generator for the seeding; ``None``
                uses torch's global RNG.

        Raises:
            InputTypeError: ``num_iters`` or ``seed`` is not an integer.
            InputDataError: ``num_iters < 0``, or ``seed`` outside what a
                ``torch.Generator`` takes.
        """
        self.num_iters = check_int("num_iters", num_iters, 0)
        self.seed = check_seed("seed", seed, allow_none=True)

    def _get_quality_function(self) -> QualityFunction:
        r"""Unused (required by BoTorch's interface)."""
        return UnitQuality()

    @torch.no_grad()
    def allocate_inducing_points(
        self,
        inputs: Tensor,
        covar_module: Kernel | None,
        num_inducing: int,
        input_batch_shape: torch.Size = torch.Size(),
    ) -> Tensor:
        r"""Cluster the inputs into ``m`` clusters.

        Args:
            inputs: A ``batch_shape x n x d`` tensor.
            covar_module: Ignored.
            num_inducing: Number ``m ≤ n`` of centroids.
            input_batch_shape: The model's input batch shape.

        Returns:
            A ``batch_shape' x m x d`` tensor of centroids.
        """
        inputs = broadcast_inputs(inputs, input_batch_shape, num_inducing)
        batch_shape, (n, d) = inputs.shape[:-2], inputs.shape[-2:]
        X = inputs.reshape(-1, n, d)  # b x n x d
        b, m = X.shape[0], num_inducing
        gen = _generator(self.seed)
        # k-means++ seeding: each new centre drawn with probability ∝ D².
        first = (_uniform(torch.Size([b]), X, gen) * n).long().clamp_max(n - 1)
        centres = X.gather(1, first.view(b, 1, 1).expand(b, 1, d))  # b x 1 x d
        dist2 = (X - centres).square().sum(-1)  # b x n
        for _ in range(1, m):
            total = dist2.sum(-1, keepdim=True)
            weights = torch.where(total > 0, dist2, torch.ones_like(dist2))
            u = _uniform(torch.Size([b, 1]), X, gen)
            cdf = weights.cumsum(-1)
            j = torch.searchsorted(cdf, u * cdf[:, -1:]).clamp_max(n - 1)  # b x 1
            new = X.gather(1, j.view(b, 1, 1).expand(b, 1, d))  # b x 1 x d
            centres = torch.cat([centres, new], dim=1)  # b x k x d
            dist2 = torch.minimum(dist2, (X - new).square().sum(-1))
        assign = None
        for _ in range(self.num_iters):
            new_assign = torch.cdist(X, centres).argmin(-1)  # b x n
            if assign is not None and torch.equal(new_assign, assign):
                break
            assign = new_assign
            sums = torch.zeros_like(centres).scatter_add_(
                1, assign.unsqueeze(-1).expand(b, n, d), X
            )  # b x m x d
            counts = torch.zeros(b, m, dtype=X.dtype, device=X.device).scatter_add_(
                1, assign, torch.ones_like(assign, dtype=X.dtype)
            )  # b x m
            centres = torch.where(
                counts.unsqueeze(-1) > 0,
                sums / counts.clamp_min(1).unsqueeze(-1),
                centres,
            )
        return centres.view(batch_shape + (m, d))
