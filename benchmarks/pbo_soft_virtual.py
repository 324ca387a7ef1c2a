r"""Virtual comparisons at the faces with a noise of their own (a screen).

The loop's default (``boundary_step=0.1``) takes a virtual comparison "the
design ``step`` inside is preferred to the face's" as it takes a person's
answer, at the person's noise scale. Here a virtual comparison's probit
scale is ``factor`` times the person's (Siivola et al. 2018 give their
virtual derivative signs a likelihood of their own, too), in the posterior
and in the hyperparameter fits; the person's answers and every prediction
keep the person's scale. ``factor = 1`` is the loop's default.

The screen tested whether the virtual comparisons hold the EP outputscale at
its box's end (they do not: the person's answers do, and that end is the
truth at σ = 0.1) and whether softer or sharper ones do better (neither);
``results/pbo_regret_diagnosis.md``, section 13.

Variants ``soft-virtual-<factor>`` (0.3, 1, 3, 10), run on
the tuning seeds like ``pbo_variants.py``'s, with the same ``--compare``::

    OMP_NUM_THREADS=1 python benchmarks/pbo_soft_virtual.py \
        --variants soft-virtual-3 --seeds 6 --store F --shard 0/2
"""

from __future__ import annotations

import os
import sys
import weakref
from pathlib import Path
from typing import Any

from _shard_threads import share_cores_for_shard

os.environ.update(share_cores_for_shard(sys.argv))  # before torch is imported

import torch
from torch import Tensor

from prefbo.likelihoods.pairwise import PairwiseProbitLikelihood
from prefbo.loop.answers import pairs_from
from prefbo.loop.model_kinds import EP_POSTERIOR_TOL, EPKind
from prefbo.models import PairwiseEPGP

sys.path.insert(0, str(Path(__file__).parent))
import pbo_regret  # noqa: E402
import pbo_variants  # noqa: E402


class SoftProbit(PairwiseProbitLikelihood):
    r"""The probit likelihood with per-comparison scales ``factors · s``
    while the model runs its inference (EP sweeps and evidence); everything
    else (predictions of new pairs) reads the person's scale ``s``."""

    def __init__(self, factors: Tensor) -> None:
        super().__init__()
        self.factors = factors
        self.inference = False

    @property
    def scale(self) -> Any:  # noqa: D102
        s = super().scale
        return s * self.factors if self.inference else s


class SoftEPGP(PairwiseEPGP):
    r""":class:`PairwiseEPGP` whose likelihood is a :class:`SoftProbit`."""

    def _run(self, method: Any, arg: Tensor) -> Any:
        self.likelihood.inference = True
        try:
            return method(arg)
        finally:
            self.likelihood.inference = False

    def _compute_state(self, chol_prior: Tensor) -> Any:
        return self._run(super()._compute_state, chol_prior)

    def _compute_evidence(self, K: Tensor) -> Any:
        return self._run(super()._compute_evidence, K)


class SoftEPKind(EPKind):
    r"""The loop's EP kind building :class:`SoftEPGP`\ s; the factors of a
    comparisons tensor are looked up in ``factors`` (set by
    :class:`SoftOptimizer` when it makes the tensor)."""

    def __init__(self, model_options: dict, seed: int) -> None:
        super().__init__(model_options, seed)
        self.factors: dict[int, tuple[weakref.ref, Tensor]] = {}

    def build(self, designs, comparisons, covar_module=None):  # noqa: D102
        opts = self._constructor_options(covar_module)
        comps, factors = self.factors[id(comparisons)]
        if comps() is not comparisons:
            raise RuntimeError("comparisons without factors")
        likelihood = SoftProbit(factors)
        return SoftEPGP(
            designs,
            comparisons,
            likelihood=likelihood,
            **{"tol": EP_POSTERIOR_TOL, **opts},
        )


class SoftOptimizer(pbo_regret.PreferentialOptimizer):
    r"""The loop's default with the virtual comparisons' scale ``factor``
    times the person's."""

    def __init__(self, *args: Any, factor: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._kind = SoftEPKind(self._kind.model_options, self._kind.seed)
        self.factor = factor

    def _model_data(self, tells=None):
        events = self._model_events(tells)  # the virtual ones have seq -1
        designs, comps = pairs_from(events)
        virtual = torch.tensor([e.seq == -1 for e in events], dtype=torch.bool)
        if comps.shape[0] != len(events):
            raise RuntimeError("expected one comparison per event")
        one = torch.ones(len(events), dtype=torch.float64)
        factors = self._kind.factors
        factors[id(comps)] = (
            weakref.ref(comps),
            torch.where(virtual, self.factor * one, one),
        )
        weakref.finalize(comps, factors.pop, id(comps), None)
        return self._to_model(designs), comps


class SoftLoop(pbo_regret.PrefboLoop):
    r""":class:`SoftOptimizer` in the benchmark's loop."""

    def __init__(self, u: pbo_regret.Utility, seed: int, factor: float) -> None:
        self.opt = SoftOptimizer(u.bounds, seed=seed, factor=factor)


pbo_variants.VARIANTS.update(
    {
        "soft-virtual-3": lambda u, seed: SoftLoop(u, seed, 3.0),
        "soft-virtual-10": lambda u, seed: SoftLoop(u, seed, 10.0),
        "soft-virtual-1": lambda u, seed: SoftLoop(u, seed, 1.0),
        "soft-virtual-0.3": lambda u, seed: SoftLoop(u, seed, 0.3),
    }
)

if __name__ == "__main__":
    pbo_variants.main()
