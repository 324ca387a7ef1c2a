r"""A quadratic trend in the loop's kernel (a screen).

The loop's model is a stationary GP: it expects the utility to be as
likely high at a face as in the middle, and the large-scale shape of a
landscape (Levy's and Ackley's bowls, Rosenbrock's valley) is carried by the
same kernel as its ripples, with one outputscale. Here the kernel adds a
Bayesian quadratic trend without cross terms,
``k_q(x, x') = Σ_i (a x̃_i x̃'_i + b x̃_i² x̃'_i²)`` with ``x̃ = x - ½`` in
the unit cube (the loop's model space): utilities are then the stationary
GP plus ``Σ_i (β_i x̃_i + γ_i x̃_i²)`` with Gaussian ``β_i, γ_i`` of variances
``a`` and ``b`` (times the outputscale), so any axis-aligned bowl (or dome)
is in the prior and its coefficients are learned from all the answers at
once. With ``a = 1, b = 16`` (fixed, not fitted) the depth along each input,
centre to face, has prior standard deviation ``√outputscale``, as the
stationary part has; the prior is centred (a bowl's lowest point
``-β_i/(2γ_i)`` is an eighth of a Cauchy variable) and adds variance at
the corners (``1.25 d`` times the outputscale).

``quadratic-trend`` runs the loop's default (EP, EUBO, virtual comparisons
at the faces) with ``ScaleKernel(RBF + k_q)`` and the default's priors;
run on the tuning seeds like ``pbo_variants.py``'s, with the same
``--compare``::

    OMP_NUM_THREADS=1 python benchmarks/pbo_quadratic.py \
        --variants quadratic-trend --seeds 6 \
        --store benchmarks/results/pbo_regret_tuning_screen.jsonl --shard 0/2
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from _shard_threads import share_cores_for_shard

os.environ.update(share_cores_for_shard(sys.argv))  # before torch is imported

import torch
from gpytorch.kernels import Kernel, ScaleKernel
from torch import Tensor

from prefbo.kernels.defaults import default_preference_covar_module

sys.path.insert(0, str(Path(__file__).parent))
import pbo_variants  # noqa: E402


class QuadraticTrendKernel(Kernel):
    r"""``Σ_i (a x̃_i x̃'_i + b x̃_i² x̃'_i²)``, ``x̃ = x - ½`` (fixed ``a, b``)."""

    has_lengthscale = False

    def __init__(self, linear: float = 1.0, quadratic: float = 16.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.linear = float(linear)
        self.quadratic = float(quadratic)

    def _features(self, x: Tensor) -> Tensor:
        c = x - 0.5
        return torch.cat([self.linear**0.5 * c, self.quadratic**0.5 * c * c], dim=-1)

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, **params) -> Tensor:
        f1, f2 = self._features(x1), self._features(x2)
        if diag:
            return (f1 * f2).sum(-1)
        return f1 @ f2.transpose(-2, -1)


def trend_covar_module(dim: int, linear: float, quadratic: float) -> ScaleKernel:
    r"""The default kernel's ``ScaleKernel`` with ``k_q`` added under it."""
    default = default_preference_covar_module(dim)
    return ScaleKernel(
        default.base_kernel + QuadraticTrendKernel(linear, quadratic),
        outputscale_prior=default.outputscale_prior,
        outputscale_constraint=default.raw_outputscale_constraint,
    )


pbo_variants.VARIANTS.update(
    {
        "quadratic-trend": pbo_variants.kernel_loop(
            lambda dim: trend_covar_module(dim, 1.0, 16.0)
        ),
        "quadratic-trend-0": pbo_variants.kernel_loop(
            lambda dim: trend_covar_module(dim, 0.0, 0.0)
        ),
    }
)

if __name__ == "__main__":
    pbo_variants.main()
