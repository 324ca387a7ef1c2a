r"""Other lengthscale priors in the loop's kernel (a screen).

The default kernel takes BoTorch ``PairwiseGP``'s lengthscale prior
``Gamma(2.4, 2.7)`` (mode 0.52 on the unit cube, little weight against
short lengthscales: its density grows as ``ℓ^1.4`` near 0). In the drifting
runs of ``results/pbo_regret_diagnosis.md`` (section 12) the refit after two
unlikely answers explained them with a shorter lengthscale (Branin, tuning
seed 4: 0.13 to 0.07) and the recommendation followed. The variants:

- ``ls-dim-scaled``: the dimension-scaled ``LogNormal(√2 + ½ log d, √3)``
  of Hvarfner, Hellsten & Nardi (2024, "Vanilla Bayesian optimization
  performs great in high dimensions"), BoTorch's default for its regression
  GPs, with its constraint ``ℓ ≥ 0.025`` and start at its mode;
- ``ls-lognormal-0.5``: ``LogNormal(log 0.5, 0.5)`` starting at its mode, a
  test of the reading above: under it ``ℓ = 0.07`` has 3.5 nats less log
  prior density than ``ℓ = 0.13`` (under ``Gamma(2.4, 2.7)``: 0.7 nats
  less), and ``ℓ = 0.1`` 3.6 nats less than the median;
  ``ls-lognormal-0.5-0.75``, ``ls-lognormal-0.5-1``: the same median with a
  wider spread (``log ℓ``'s standard deviation 0.75, 1; that of
  ``Gamma(2.4, 2.7)`` is 0.72, but its left tail is exponential in
  ``log ℓ``, not Gaussian), starting at their modes (0.28, 0.18);
  ``ls-lognormal-0.5-0.75-start-0.5``, ``ls-lognormal-0.5-1-start-0.5``:
  the same priors starting at the median 0.5 (the modes confound the
  spread with the fits' start);
- ``ls-gamma-default``: the default's prior built by this script (its
  questions are the default's: the check of the factory).

Everything else is the loop's default (EP, EUBO, virtual comparisons at the
faces, the outputscale's ``SmoothedBox(0.01, 100)``). Run on the tuning
seeds like ``pbo_variants.py``'s (whose ``--compare`` takes
``boundary_step=None`` as its reference, not the default)::

    OMP_NUM_THREADS=1 python benchmarks/pbo_lengthscale.py \
        --variants ls-dim-scaled ls-lognormal-0.5 --seeds 6 \
        --store benchmarks/results/pbo_regret_tuning_screen.jsonl --shard 0/2
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

from _shard_threads import share_cores_for_shard

os.environ.update(share_cores_for_shard(sys.argv))  # before torch is imported

from gpytorch.constraints import GreaterThan
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.priors import GammaPrior, LogNormalPrior, Prior

from prefbo.kernels.defaults import default_preference_covar_module

sys.path.insert(0, str(Path(__file__).parent))
import pbo_variants  # noqa: E402


def lengthscale_covar_module(dim: int, prior: Prior, mode: Any, lower: float):
    r"""The default kernel with the lengthscale prior ``prior``, constraint
    ``ℓ ≥ lower`` and every lengthscale starting at ``mode``."""
    default = default_preference_covar_module(dim)
    return ScaleKernel(
        RBFKernel(
            ard_num_dims=dim,
            lengthscale_prior=prior,
            lengthscale_constraint=GreaterThan(
                lower_bound=lower, transform=None, initial_value=mode
            ),
        ),
        outputscale_prior=default.outputscale_prior,
        outputscale_constraint=default.raw_outputscale_constraint,
    )


def dim_scaled(dim: int) -> ScaleKernel:
    r"""Hvarfner et al.'s ``LogNormal(√2 + ½ log d, √3)``, ``ℓ ≥ 0.025``."""
    loc, scale = math.sqrt(2.0) + 0.5 * math.log(dim), math.sqrt(3.0)
    mode = math.exp(loc - scale**2)
    return lengthscale_covar_module(dim, LogNormalPrior(loc, scale), mode, 0.025)


def lognormal(median: float, scale: float, start: float | None = None):
    r"""``LogNormal(log median, scale)``, starting at ``start`` (default: its
    mode, ``median · exp(-scale²)``)."""

    def make(dim: int) -> ScaleKernel:
        loc = math.log(median)
        first = math.exp(loc - scale**2) if start is None else start
        return lengthscale_covar_module(dim, LogNormalPrior(loc, scale), first, 1e-4)

    return make


def gamma_default(dim: int) -> ScaleKernel:
    r"""The default's ``Gamma(2.4, 2.7)`` through this script's factory."""
    prior = GammaPrior(2.4, 2.7)
    mode = (prior.concentration - 1) / prior.rate  # as the default: float32
    return lengthscale_covar_module(dim, prior, mode, 1e-4)


pbo_variants.VARIANTS.update(
    {
        "ls-dim-scaled": pbo_variants.kernel_loop(dim_scaled),
        "ls-lognormal-0.5": pbo_variants.kernel_loop(lognormal(0.5, 0.5)),
        "ls-lognormal-0.5-0.75": pbo_variants.kernel_loop(lognormal(0.5, 0.75)),
        "ls-lognormal-0.5-1": pbo_variants.kernel_loop(lognormal(0.5, 1.0)),
        "ls-lognormal-0.5-0.75-start-0.5": pbo_variants.kernel_loop(
            lognormal(0.5, 0.75, 0.5)
        ),
        "ls-lognormal-0.5-1-start-0.5": pbo_variants.kernel_loop(
            lognormal(0.5, 1.0, 0.5)
        ),
        "ls-gamma-default": pbo_variants.kernel_loop(gamma_default),
    }
)

if __name__ == "__main__":
    pbo_variants.main()
