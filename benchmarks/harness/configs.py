r"""The PBO loops the benchmarks compare, and the settings they share.

The setting (fixed before any run):

- the problems of :class:`~benchmarks.harness.problems.Utility`; the simulated
  person answers ``P(x ≻ x') = Φ((u(x) - u(x')) / (√2 σ))``
  (:class:`~prefbo.test_functions.SimulatedPerson`, seeded by the run's
  seed), ``σ`` in :data:`SIGMAS`;
- every configuration first gets the same :data:`INITIAL_PAIRS` uniformly
  random pairs (:func:`initial_pairs`, drawn from the run's seed) and their
  answers, then asks its own questions;
- ``botorch`` (:data:`REFERENCE`, :class:`BoTorchLoop`): ``PairwiseGP`` on
  the designs mapped to the unit cube (as BoTorch's tutorials do), refitted
  with ``PairwiseLaplaceMarginalLogLikelihood`` at every answer, questions
  from ``AnalyticExpectedUtilityOfBestOption`` maximised by
  ``optimize_acqf(q=2, num_restarts=4, raw_samples=64)``; the recommendation
  is the told design of highest posterior mean;
- ``default`` (:class:`PrefboLoop`): ``PreferentialOptimizer(box,
  seed=seed)`` with every setting at its default; the recommendation is its
  ``best()``. The other names of :data:`CONFIGS` change one setting.

Seed sets (:data:`SEED_SETS`): ``tuning`` (0-19), which development may look
at; ``untuned`` (1000-1019), run once for the published figures of the
virtual comparisons at the faces; ``fresh`` (2000-2019), fixed before any
run, for the figures of the next change of the default (the untuned seeds
have been seen since).

A loop has ``tell(pair, winner)``, ``ask()`` and ``best()``, on designs of
the problem's box; :func:`make_loop` builds a configuration's.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.exceptions.errors import ModelFittingError
from botorch.exceptions.warnings import OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models.pairwise_gp import (
    PairwiseGP,
    PairwiseLaplaceMarginalLogLikelihood,
)
from botorch.optim import optimize_acqf
from linear_operator.utils.warnings import NumericalWarning as LONumericalWarning
from torch import Tensor

from benchmarks.harness.problems import Utility
from prefbo.loop.optimizer import PreferentialOptimizer, expected_fit_warnings

SIGMAS = (0.01, 0.1, 0.3)
SEED_SETS = {
    "tuning": range(0, 20),
    "untuned": range(1000, 1020),
    "fresh": range(2000, 2020),
}
BUDGETS = (30, 60)
INITIAL_PAIRS = 4
REFERENCE = "botorch"
#: name -> PreferentialOptimizer keyword arguments beside (bounds, seed)
CONFIGS: dict[str, dict[str, Any]] = {
    REFERENCE: {},
    "default": {},
    "laplace": {"model": "laplace"},
    "random": {"strategy": "random"},
}


@contextmanager
def quiet() -> Iterator[None]:
    r"""The warnings both loops trigger by design (jitter on near-singular
    kernel matrices, L-BFGS-B stopping on its limits), and only those."""
    with warnings.catch_warnings(), expected_fit_warnings():
        warnings.filterwarnings(
            "ignore", message=r".*not p\.d\., added jitter", category=LONumericalWarning
        )
        warnings.filterwarnings("ignore", category=OptimizationWarning)
        yield


def initial_pairs(u: Utility, seed: int) -> list[Tensor]:
    r"""The run's :data:`INITIAL_PAIRS` random ``2 x d`` pairs of the box."""
    gen = torch.Generator().manual_seed(seed)
    U = torch.rand(INITIAL_PAIRS, 2, u.dim, generator=gen, dtype=torch.float64)
    return list(u.from_unit(U))


class BoTorchLoop:
    r"""The reference: BoTorch's ``PairwiseGP`` + analytic EUBO, unit cube."""

    def __init__(self, u: Utility, seed: int) -> None:
        self.u, self.seed = u, seed
        self.Z = torch.empty(0, u.dim, dtype=torch.float64)  # n x d, unit cube
        self.comps = torch.empty(0, 2, dtype=torch.long)
        self.model: PairwiseGP | None = None

    def tell(self, pair: Tensor, winner: int) -> None:
        r"""Add the ``2 x d`` pair and its answer (``winner`` 0 or 1); refit."""
        n = self.Z.shape[0]
        self.Z = torch.cat([self.Z, self.u.to_unit(pair)])
        self.comps = torch.cat(
            [self.comps, torch.tensor([[n + winner, n + 1 - winner]])]
        )
        self.model = PairwiseGP(self.Z, self.comps)
        mll = PairwiseLaplaceMarginalLogLikelihood(self.model.likelihood, self.model)
        try:
            fit_gpytorch_mll(mll)
        except ModelFittingError:  # keep the default hyperparameters
            pass
        self.model.eval()

    def ask(self) -> Tensor:
        r"""The next question, a ``2 x d`` pair of the box."""
        acqf = AnalyticExpectedUtilityOfBestOption(pref_model=self.model)
        cube = torch.zeros(2, self.u.dim, dtype=torch.float64)
        cube[1] = 1
        pair, _ = optimize_acqf(
            acqf,
            bounds=cube,
            q=2,
            num_restarts=4,
            raw_samples=64,
            options={"seed": self.seed * 1000 + self.comps.shape[0]},
        )
        return self.u.from_unit(pair.detach())

    def best(self) -> Tensor:
        r"""The told design of highest posterior mean (``d``)."""
        with torch.no_grad():
            mean = self.model.posterior(self.Z).mean.reshape(-1)
        return self.u.from_unit(self.Z[mean.argmax()])


class PrefboLoop:
    r"""prefbo's ``PreferentialOptimizer`` with one configuration's settings."""

    def __init__(self, u: Utility, seed: int, **kwargs: Any) -> None:
        self.opt = PreferentialOptimizer(u.bounds, seed=seed, **kwargs)

    def tell(self, pair: Tensor, winner: int) -> None:
        r"""Tell the ``2 x d`` pair and its answer (``winner`` 0 or 1)."""
        self.opt.tell(winner, options=pair)

    def ask(self) -> Tensor:
        r"""The next question, a ``2 x d`` pair of the box."""
        return self.opt.ask()

    def best(self) -> Tensor:
        r"""The optimiser's recommendation (``d``)."""
        return self.opt.best()[0]


def make_loop(config: str, u: Utility, seed: int) -> BoTorchLoop | PrefboLoop:
    r"""The loop of configuration ``config`` (a key of :data:`CONFIGS`) on
    problem ``u``, seeded by ``seed``."""
    if config == REFERENCE:
        return BoTorchLoop(u, seed)
    return PrefboLoop(u, seed, **CONFIGS[config])
