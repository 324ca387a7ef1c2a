r"""Changes of the loop's default, measured against it in the regret benchmark.

The setting is ``benchmarks/pbo_regret.py``'s (BoTorch's problems
standardised over their box, the simulated person's noise σ in those units,
the same 4 random pairs first); only the *tuning* seeds are meant for it.
Each variant changes one thing of ``PreferentialOptimizer``'s default:

- ``default``: the loop's default before the virtual comparisons at the
  box's faces (``boundary_step=None``), the reference of the comparison and
  the base of every variant below but the ``boundary`` ones;
- ``os-lognormal-30``, ``os-lognormal-100``: the EP kernel's outputscale
  prior ``LogNormal(log 30, 1.5)`` (constraint ``(0.005, 200)``) or
  ``LogNormal(log 100, 2)`` (constraint ``(0.005, 2000)``) instead of
  BoTorch's ``SmoothedBox(0.01, 100)``; lengthscales as BoTorch's;
- ``os-box-10000``: BoTorch's box prior on the outputscale widened to
  ``SmoothedBox(0.01, 10^4)`` (at σ = 0.01 the fits sat at the box's end,
  100, where the truth is about 10^4);
- ``recommend-mean-minus-sd``: the recommendation is the told design of
  highest posterior mean minus one posterior standard deviation;
- ``resolved-repeats-allowed``: ``avoid_resolved=False`` (questions that
  repeat an earlier one the model has resolved are asked, too);
- ``cold-refits``: ``warm_start_fits=False`` (every refit starts at the
  default hyperparameters instead of the previous fit's: does the chain of
  warm starts keep a fit in a basin the answers have left?);
- ``os-box-0.9-100``: BoTorch's box prior on the outputscale raised at its
  lower end to ``SmoothedBox(0.9, 100)`` (fits at 0.01 take the person for
  a coin and stop learning);
- ``keep-winner``: ``keep_winner=True`` (every question keeps the last
  answer's winner);
- ``keep-best``: every question keeps the current recommendation, the other
  option maximises EUBO given it;
- ``thompson``: ``strategy="ts"``;
- ``laplace``: ``model="laplace"``;
- ``sticky-0.9``, ``sticky-0.75``: the recommendation (the incumbent) stays
  until a told design of higher posterior mean beats it with posterior
  probability above 0.9 (0.75);
- ``boundary-0.05``, ``boundary-0.1``: the virtual comparisons at the faces
  of :mod:`prefbo.loop.boundary` with ``boundary_step`` 0.05 or 0.1 (the
  loop's default since this screen: ``boundary-0.1``);
- ``boundary-told-0.1``, ``boundary-told-0.2``: virtual comparisons that are
  a function of the told questions alone: one for every *told* option on a
  face, and those of the options proposed while a question is computed
  dropped once it is asked (:class:`BoundaryToldOptimizer`);
- ``boundary-near-winner``: the loop's default (``boundary-0.1``) with a
  face's virtual comparisons lapsing while the last winner lies within
  ``2 boundary_step`` of it (:class:`NearWinnerOptimizer`), so that a face
  optimum can be reached (worse than ``boundary-0.1`` on the benchmark;
  diagnosis section 11);
- ``challenge-new-best``: the loop's default (``boundary-0.1``), but an
  answer that changes the recommendation is followed by the question "new
  recommendation or the previous one?" while the model is unsure of its
  answer (:class:`ChallengeLoop`);
- ``boundary-os-30``: the loop's default (``boundary-0.1``) with the
  outputscale's box prior ending at 30 instead of 100 (with the virtual
  comparisons the fits sit at the box's end);
- ``boundary-os-0.9-100``: the loop's default with ``os-box-0.9-100``'s
  floor (screened before the virtual comparisons only);
- ``boundary-dedupe``: the loop's default (``boundary-0.1``), but a
  virtual comparison is not made again where the model has it already
  (within ``REPEAT_TOL``; :class:`DedupeOptimizer`);
- ``fit-real``: the loop's default (``boundary-0.1``) with the
  hyperparameters fitted to the person's answers alone, the virtual
  comparisons entering only the posterior (:class:`FitRealOptimizer`);
  ``fit-real-recommend-real``: also the recommendation from the posterior
  of the person's answers alone;
- ``outputscale-grid-mixture``: four EP models whose outputscales are fixed
  at 1, 10, 100 and 1,000 (lengthscales fitted, warm-started along the
  answers), weighted after every answer by their evidence (plus the
  lengthscale prior); the question maximises the weighted sum of their EUBO
  values (EUBO is linear in the posterior, so this is the mixture's EUBO)
  with BoTorch's ``optimize_acqf`` (4 restarts, 128 raw samples); the
  recommendation is the told design of highest mixture mean;
- ``eubo-optimize-acqf-control``: the same questioning with the default's
  model alone (one fitted outputscale): the control of the mixture.

Runs are appended to a JSON-lines store (default
``results/pbo_regret_tuning_variants.jsonl``; a rerun skips what it holds).
``--compare`` prints, per cell, the geometric mean over the seeds run by
both of ``(r + 0.001) / (r_default + 0.001)`` after 30 and 60 answers (below
1: the variant is better), and per variant the count of runs above 3x the
default's median regret of their cell. Findings:
``results/pbo_regret_diagnosis.md``, sections 6-11.

Run single-threaded, e.g.::

    OMP_NUM_THREADS=1 python benchmarks/pbo_variants.py \
        --variants default os-lognormal-30 --seeds 20
    python benchmarks/pbo_variants.py --compare

``--shard i/k`` runs every k-th run (here and in the scripts that add
variants); without ``OMP_NUM_THREADS``, each of ``k`` shards runs on its
share of the cores (``_shard_threads.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _shard_threads import share_cores_for_shard

os.environ.update(share_cores_for_shard(sys.argv))  # before torch is imported

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.optim import optimize_acqf
from botorch.utils.transforms import t_batch_mode_transform
from gpytorch.constraints import GreaterThan, Interval
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.priors import GammaPrior, LogNormalPrior
from torch import Tensor

from prefbo.acquisition import FastAnalyticEUBO
from prefbo.kernels.defaults import default_preference_covar_module
from prefbo.loop.answers import Answer, pairs_from
from prefbo.loop.boundary import ROUNDS, face_columns, face_comparisons
from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.loop.repeats import (
    MIN_INFORMATION,
    REPEAT_TOL,
    answer_information,
    near_copies,
    repeats,
)
from prefbo.mlls import PairwiseEPMLL

sys.path.insert(0, str(Path(__file__).parent))
import pbo_regret  # noqa: E402

STORE = pbo_regret.RESULTS / "pbo_regret_tuning_variants.jsonl"
BASE = "default"
GRID = (1.0, 10.0, 100.0, 1000.0)
# the loop's default before the virtual comparisons at the faces: the base of
# every variant screened before them (their stored runs reproduce with it)
PREVIOUS = {"boundary_step": None}
BUDGETS = (30, 60)


def _kernel(dim: int, outputscale_prior: Any = None, constraint: Any = None):
    r"""BoTorch's ``ScaleKernel(RBFKernel(ARD))`` lengthscales (``Gamma(2.4,
    2.7)``, starting at its mode) with another outputscale prior."""
    return ScaleKernel(
        RBFKernel(
            ard_num_dims=dim,
            lengthscale_prior=GammaPrior(2.4, 2.7),
            lengthscale_constraint=GreaterThan(
                1e-4, transform=None, initial_value=1.4 / 2.7
            ),
            dtype=torch.float64,
        ),
        outputscale_prior=outputscale_prior,
        outputscale_constraint=constraint,
        dtype=torch.float64,
    )


def fixed_outputscale_kernel(dim: int, outputscale: float) -> ScaleKernel:
    r"""The kernel with its outputscale fixed (not fitted) at ``outputscale``."""
    k = _kernel(dim, constraint=GreaterThan(1e-6))
    k.outputscale = outputscale
    k.raw_outputscale.requires_grad_(False)
    return k


def lognormal_loop(median: float, scale: float, upper: float):
    r"""A loop factory: the default with a log-normal outputscale prior."""

    def make(u: pbo_regret.Utility, seed: int) -> pbo_regret.PrefboLoop:
        prior = LogNormalPrior(math.log(median), scale)
        con = Interval(0.005, upper, initial_value=1.0)
        kernel = _kernel(u.dim, prior, con)
        return pbo_regret.PrefboLoop(
            u, seed, model_options={"covar_module": kernel}, **PREVIOUS
        )

    return make


def kernel_loop(kernel: Callable[[int], Any]):
    r"""A loop factory: the loop's default (virtual comparisons at the faces
    included) with the covariance module ``kernel(dim)``."""

    def make(u: pbo_regret.Utility, seed: int) -> pbo_regret.PrefboLoop:
        return pbo_regret.PrefboLoop(
            u, seed, model_options={"covar_module": kernel(u.dim)}
        )

    return make


def box_loop(lower: float, upper: float):
    r"""A loop factory: the default with the outputscale's box prior
    ``SmoothedBox(lower, upper)`` (constraint ``(lower / 2, 2 upper)``)."""

    def make(u: pbo_regret.Utility, seed: int) -> pbo_regret.PrefboLoop:
        kernel = default_preference_covar_module(
            u.dim, outputscale_bounds=(lower, upper)
        )
        return pbo_regret.PrefboLoop(
            u, seed, model_options={"covar_module": kernel}, **PREVIOUS
        )

    return make


class MeanMinusSdLoop(pbo_regret.PrefboLoop):
    r"""The default, recommending the told design of highest ``mean - sd``."""

    def best(self) -> Tensor:  # noqa: D102
        designs, _ = self.opt.data()
        mean, sd = self.opt.predict(designs)
        return designs[int((mean - sd).argmax())].clone()


class MixtureEUBO(AcquisitionFunction):
    r"""``sum_k w_k EUBO_k(x1, x2)``: the EUBO of a mixture of posteriors."""

    def __init__(self, models: Sequence[Any], weights: Sequence[float]) -> None:
        super().__init__(model=models[0])
        self.members = [FastAnalyticEUBO(m) for m in models]
        self.weights = list(weights)

    @t_batch_mode_transform(expected_q=2)
    def forward(self, X: Tensor) -> Tensor:  # noqa: D102
        return sum(w * f(X) for w, f in zip(self.weights, self.members))


def evidence(model: Any) -> float:
    r"""A fitted pairwise model's evidence plus its hyperparameters' log prior."""
    model.train()
    with torch.no_grad():
        out = model(*model.train_inputs)
        value = float(PairwiseEPMLL(model.likelihood, model)(out, model.train_targets))
    model.eval()
    return value


class MixtureLoop:
    r"""Loops of fixed outputscales (``grid``; ``None``: the default's single
    fitted model), weighted by evidence, asked through :class:`MixtureEUBO`."""

    def __init__(self, u: pbo_regret.Utility, seed: int, grid=GRID) -> None:
        self.u, self.seed, self.answers = u, seed, 0
        make = pbo_regret.PreferentialOptimizer
        if grid is None:
            self.opts = [make(u.bounds, seed=seed, **PREVIOUS)]
        else:
            self.opts = [
                make(
                    u.bounds,
                    seed=seed,
                    model_options={"covar_module": fixed_outputscale_kernel(u.dim, g)},
                    **PREVIOUS,
                )
                for g in grid
            ]
        self.weights = [1.0 / len(self.opts)] * len(self.opts)

    def tell(self, pair: Tensor, winner: int) -> None:  # noqa: D102
        for opt in self.opts:
            opt.tell(winner, options=pair)
        self.answers += 1
        log_ev = torch.tensor([evidence(opt.model) for opt in self.opts])
        self.weights = torch.softmax(log_ev, 0).tolist()

    def ask(self) -> Tensor:  # noqa: D102
        acqf = MixtureEUBO([opt.model for opt in self.opts], self.weights)
        cube = torch.zeros(2, self.u.dim, dtype=torch.float64)
        cube[1] = 1
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed * 1000 + self.answers)
            pair, _ = optimize_acqf(
                acqf, bounds=cube, q=2, num_restarts=4, raw_samples=128
            )
        return self.u.from_unit(pair.detach())

    def best(self) -> Tensor:  # noqa: D102
        designs, _ = self.opts[0].data()
        mean = sum(
            w * opt.predict(designs)[0] for w, opt in zip(self.weights, self.opts)
        )
        return designs[int(mean.argmax())].clone()


class KeepBestOptimizer(pbo_regret.PreferentialOptimizer):
    r"""The loop asking its current recommendation against a new option."""

    def _fixed_option(self) -> Tensor | None:
        return self.best()[0] if self._tells else None


class KeepBestLoop(pbo_regret.PrefboLoop):
    r"""The default with every question ``[best(), EUBO's other option]``."""

    def __init__(self, u: pbo_regret.Utility, seed: int, **kwargs: Any) -> None:
        self.opt = KeepBestOptimizer(u.bounds, seed=seed, **kwargs)


class StickyBestLoop(pbo_regret.PrefboLoop):
    r"""The default, keeping its recommendation (the incumbent) until a told
    design of higher posterior mean is better than it with posterior
    probability above ``threshold`` (joint posterior of the two)."""

    def __init__(self, u: pbo_regret.Utility, seed: int, threshold: float) -> None:
        super().__init__(u, seed, **PREVIOUS)
        self.threshold = threshold
        self.incumbent: Tensor | None = None

    def best(self) -> Tensor:  # noqa: D102
        x = self.opt.best()[0]
        if self.incumbent is None or torch.equal(x, self.incumbent):
            self.incumbent = x
            return x
        Z = self.opt._to_model(torch.stack([x, self.incumbent]))
        with torch.no_grad():
            post = self.opt.model.posterior(Z)
            m = post.mean.reshape(-1)
            C = post.mvn.covariance_matrix.reshape(2, 2)
        sd = (C[0, 0] + C[1, 1] - 2 * C[0, 1]).clamp_min(1e-12).sqrt()
        p = torch.special.ndtr((m[0] - m[1]) / sd)
        if float(p) > self.threshold:
            self.incumbent = x
        return self.incumbent


class ChallengeLoop(pbo_regret.PrefboLoop):
    r"""The loop's default, but when an answer changes the recommendation
    (the told design of highest posterior mean) the next question pairs the
    new recommendation with the previous one, unless the two are within
    ``REPEAT_TOL`` of each other, the pair was asked before, or the model
    already knows its answer (less than ``MIN_INFORMATION`` nats): a
    recommendation resting on one or two answers is checked against the
    one it replaces, as a dueling-bandit champion is."""

    def __init__(self, u: pbo_regret.Utility, seed: int) -> None:
        super().__init__(u, seed)
        self.previous: Tensor | None = None
        self.current: Tensor | None = None

    def tell(self, pair: Tensor, winner: int) -> None:  # noqa: D102
        self.opt.tell(winner, options=pair)
        self.previous, self.current = self.current, self.opt.best()[0]

    def best(self) -> Tensor:  # noqa: D102
        return self.current

    def ask(self) -> Tensor:  # noqa: D102
        if (
            self.previous is not None
            and len(self.opt.history) >= self.opt.initial_random
        ):
            X = torch.stack([self.current, self.previous])
            Z = self.opt.to_unit(X)
            asked = [self.opt.to_unit(t.options) for t in self.opt.history]
            if (
                not near_copies(Z)
                and not repeats(Z, asked)
                and answer_information(self.opt.model, Z) >= MIN_INFORMATION
            ):
                return X
        return self.opt.ask()


def _real(tells: Sequence[Answer]) -> list[Answer]:
    r"""``tells`` without their virtual comparisons."""
    return [Answer(t.seq, t.options, t.answer) for t in tells]


class FitRealOptimizer(pbo_regret.PreferentialOptimizer):
    r"""The loop's default with its hyperparameters fitted to the person's
    answers alone: the virtual comparisons at the faces enter the posterior
    (questions and recommendation) under those hyperparameters, but not the
    fits. With ``recommend_real``, the recommendation is the told design of
    highest posterior mean given the real answers alone (same
    hyperparameters)."""

    def __init__(self, *args: Any, recommend_real: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.recommend_real = recommend_real

    def _model_data(self, tells=None):
        # explicit tells: the fits' data (FittedModels._fitted)
        return super()._model_data(None if tells is None else _real(tells))

    def best(self) -> tuple[Tensor, float, float]:  # noqa: D102
        if not self.recommend_real or not self._tells:
            return super().best()
        k = len(self._tells)
        fitted = self._fitted(k - k % self.refit_every)
        designs, comps = self._model_data(self._tells)
        with expected_fit_warnings():
            model = self._kind.build(designs, comps, fitted.covar_module)
            if k - k % self.refit_every > 0:
                self._kind.warm_start(model, fitted)
            model.eval()
            told, _ = self.data()
            with torch.no_grad():
                mean = model.posterior(self._to_model(told).unsqueeze(-2)).mean
        i = int(mean.reshape(-1).argmax())
        return told[i].clone(), float("nan"), float("nan")


class FitRealLoop(pbo_regret.PrefboLoop):
    r""":class:`FitRealOptimizer` in the benchmark's loop."""

    def __init__(self, u: pbo_regret.Utility, seed: int, recommend_real: bool) -> None:
        self.opt = FitRealOptimizer(u.bounds, seed=seed, recommend_real=recommend_real)


class DedupeOptimizer(pbo_regret.PreferentialOptimizer):
    r"""The loop's default, but a virtual comparison that repeats one the
    model has (every point of the pair within ``REPEAT_TOL`` of the other's,
    unit cube) is not made again: a question whose face proposals all repeat
    earlier comparisons is asked as it is."""

    def _next_question(self) -> Tensor:
        question, fallback = self._question()
        use = self.boundary_step is not None and self._strategy.uses_model
        if use and len(self._tells) >= self.initial_random:
            columns = face_columns(self.space, self.dim)
            kept = int(self._fixed_option() is not None)  # told already
            have = [
                self.to_unit(v)
                for t in self._tells
                if t.virtual is not None
                for v in t.virtual
            ]
            try:
                for _ in range(ROUNDS):
                    pairs = face_comparisons(
                        self.to_unit(question[kept:]), columns, self.boundary_step
                    )
                    new = []
                    for pair in pairs:
                        P = torch.stack(pair)
                        if not any((P - H).abs().max() <= REPEAT_TOL for H in have):
                            new.append(P)
                            have.append(P)
                    if fallback or not new:
                        break
                    self._proposed += [self.from_unit(P) for P in new]
                    self._model = None
                    question, fallback = self._question()
                if self._proposed:
                    self._pending_virtual = torch.stack(self._proposed)
            finally:
                if self._proposed:
                    self._proposed, self._model = [], None
        self.random_fallbacks += int(fallback)
        return question


class DedupeLoop(pbo_regret.PrefboLoop):
    r""":class:`DedupeOptimizer` in the benchmark's loop."""

    def __init__(self, u: pbo_regret.Utility, seed: int) -> None:
        self.opt = DedupeOptimizer(u.bounds, seed=seed)


def face_answers(opt: Any, options: Tensor, step: float) -> list[Answer]:
    r"""The virtual answers "the design ``step`` inside ≻ the option" of
    ``options`` (``q x d``, the box) on the faces of a box optimiser's unit
    cube (:func:`prefbo.loop.boundary.face_comparisons`)."""
    columns = face_columns(None, options.shape[-1])
    pairs = face_comparisons(opt._to_model(options), columns, step)
    return [Answer(-1, opt._from_model(torch.stack(pair)), 0) for pair in pairs]


class BoundaryToldOptimizer(pbo_regret.PreferentialOptimizer):
    r"""Virtual comparisons that are a function of the told answers alone:
    one for every told option on a face, and while a question is asked, one
    for every option proposed on a face (the question is asked again, at most
    ``rounds`` times; these are dropped once it is asked)."""

    def __init__(self, *args: Any, step: float, rounds: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.step, self.rounds = step, rounds
        self._temporary: list[Answer] = []

    def _model_data(self, tells=None):
        events: list[Answer] = []
        for t in self._tells if tells is None else tells:
            events += [t, *face_answers(self, t.options, self.step)]
        if tells is None:
            events += self._temporary
        designs, comps = pairs_from(events)
        return self._to_model(designs), comps

    def _next_question(self) -> Tensor:
        k = len(self._tells)
        self._temporary = []
        for r in range(self.rounds + 1):
            question = super()._next_question()
            if r == self.rounds or k < self.initial_random:
                break
            new = face_answers(self, question, self.step)
            if not new:
                break
            self._temporary += new
            self._model = None  # rebuilt with them
        if self._temporary:
            self._temporary, self._model = [], None
        return question


class BoundaryToldLoop(pbo_regret.PrefboLoop):
    r"""The default with :class:`BoundaryToldOptimizer`'s virtual comparisons."""

    def __init__(self, u: pbo_regret.Utility, seed: int, step: float) -> None:
        self.opt = BoundaryToldOptimizer(
            u.bounds, seed=seed, step=step, rounds=3, **PREVIOUS
        )


class NearWinnerOptimizer(pbo_regret.PreferentialOptimizer):
    r"""The loop's default, but a face's virtual comparisons lapse while the
    last answer's winner lies within ``2 boundary_step`` of that face, so a
    person who keeps choosing designs by a face is asked about the face
    again (the default reaches a face optimum only to within about
    ``boundary_step``)."""

    def _model_data(self, tells=None):
        tells = self._tells if tells is None else tells
        near = None  # the last winner, unit cube
        if tells:
            near = self.to_unit(tells[-1].options[tells[-1].answer])
        events: list[Answer] = []
        for t in tells:
            for pair in [] if t.virtual is None else t.virtual:
                inner, face = self.to_unit(pair)
                d = int((inner != face).nonzero()[0])
                lapsed = near is not None and bool(
                    (near[d] - face[d]).abs() <= 2 * self.boundary_step
                )
                if not lapsed:
                    events.append(Answer(-1, pair, 0))
            events.append(t)
        if tells is self._tells:
            events += [Answer(-1, pair, 0) for pair in self._proposed]
        designs, comps = pairs_from(events)
        return self._to_model(designs), comps


class NearWinnerLoop(pbo_regret.PrefboLoop):
    r"""The default with :class:`NearWinnerOptimizer`'s lapsing comparisons."""

    def __init__(self, u: pbo_regret.Utility, seed: int) -> None:
        self.opt = NearWinnerOptimizer(u.bounds, seed=seed)


VARIANTS: dict[str, Callable[[pbo_regret.Utility, int], Any]] = {
    BASE: lambda u, seed: pbo_regret.PrefboLoop(u, seed, **PREVIOUS),
    "os-lognormal-30": lognormal_loop(30.0, 1.5, 200.0),
    "os-lognormal-100": lognormal_loop(100.0, 2.0, 2000.0),
    "os-box-10000": box_loop(0.01, 1e4),
    "os-box-0.9-100": box_loop(0.9, 100.0),
    "recommend-mean-minus-sd": lambda u, seed: MeanMinusSdLoop(u, seed, **PREVIOUS),
    "resolved-repeats-allowed": lambda u, seed: pbo_regret.PrefboLoop(
        u, seed, avoid_resolved=False, **PREVIOUS
    ),
    "cold-refits": lambda u, seed: pbo_regret.PrefboLoop(
        u, seed, warm_start_fits=False, **PREVIOUS
    ),
    "keep-winner": lambda u, seed: pbo_regret.PrefboLoop(
        u, seed, keep_winner=True, **PREVIOUS
    ),
    "keep-best": lambda u, seed: KeepBestLoop(u, seed, **PREVIOUS),
    "sticky-0.9": lambda u, seed: StickyBestLoop(u, seed, 0.9),
    "sticky-0.75": lambda u, seed: StickyBestLoop(u, seed, 0.75),
    "thompson": lambda u, seed: pbo_regret.PrefboLoop(
        u, seed, strategy="ts", **PREVIOUS
    ),
    "laplace": lambda u, seed: pbo_regret.PrefboLoop(
        u, seed, model="laplace", **PREVIOUS
    ),
    "boundary-0.05": lambda u, seed: pbo_regret.PrefboLoop(u, seed, boundary_step=0.05),
    "boundary-0.1": lambda u, seed: pbo_regret.PrefboLoop(u, seed, boundary_step=0.1),
    "boundary-near-winner": lambda u, seed: NearWinnerLoop(u, seed),
    "challenge-new-best": lambda u, seed: ChallengeLoop(u, seed),
    "boundary-os-30": kernel_loop(
        lambda dim: default_preference_covar_module(
            dim, outputscale_bounds=(0.01, 30.0)
        )
    ),
    "boundary-os-0.9-100": kernel_loop(
        lambda dim: default_preference_covar_module(
            dim, outputscale_bounds=(0.9, 100.0)
        )
    ),
    "boundary-dedupe": lambda u, seed: DedupeLoop(u, seed),
    "fit-real": lambda u, seed: FitRealLoop(u, seed, recommend_real=False),
    "fit-real-recommend-real": lambda u, seed: FitRealLoop(
        u, seed, recommend_real=True
    ),
    "boundary-told-0.1": lambda u, seed: BoundaryToldLoop(u, seed, step=0.1),
    "boundary-told-0.2": lambda u, seed: BoundaryToldLoop(u, seed, step=0.2),
    "outputscale-grid-mixture": lambda u, seed: MixtureLoop(u, seed),
    "eubo-optimize-acqf-control": lambda u, seed: MixtureLoop(u, seed, grid=None),
}


def run(args: argparse.Namespace) -> None:
    r"""Every missing run of this shard on the tuning seeds
    (``pbo_regret.pending``: seeds outermost, variants interleaved)."""
    done = {pbo_regret.key(r) for r in pbo_regret.load(args.store)}
    for p, s, seed, v in pbo_regret.pending(args, "tuning", args.variants, done):
        rec = pbo_regret.run_one(p, s, seed, v, args.answers, make_loop=VARIANTS[v])
        rec["regret"] = [round(x, 5) for x in rec.pop("regret")]
        rec.pop("seconds")  # not timed interleaved with the reference
        with args.store.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(
            f"{p:>11s} σ={s:<5} seed {seed:>3d} {v}: {rec['regret'][-1]:.4f}",
            flush=True,
        )


def compare(records: list[dict[str, Any]], budgets=BUDGETS) -> str:
    r"""The comparison table of the store's records against ``default``."""
    cells: dict[tuple, dict[str, dict[int, list[float]]]] = {}
    for r in records:
        cell = cells.setdefault((r["problem"], r["sigma"]), {})
        cell.setdefault(r["config"], {})[r["seed"]] = r["regret"]
    variants = sorted({r["config"] for r in records} - {BASE})
    lines = [
        "| problem | σ | "
        + " | ".join(f"{v} ({'/'.join(map(str, budgets))})" for v in variants)
        + " |",
        "|---|---|" + "---|" * len(variants),
    ]
    above = {v: [0] * len(budgets) for v in [BASE, *variants]}
    runs = {v: [0] * len(budgets) for v in above}
    for (problem, sigma), cell in sorted(cells.items()):
        base = cell.get(BASE, {})
        row = f"| {problem} | {sigma} |"
        for v in variants:
            seeds = sorted(set(base) & set(cell.get(v, {})))
            ratios = []
            for b in budgets:
                logs = [
                    math.log((cell[v][s][b - 1] + 1e-3) / (base[s][b - 1] + 1e-3))
                    for s in seeds
                    if len(cell[v][s]) >= b and len(base[s]) >= b
                ]
                ratios.append(f"{math.exp(sum(logs) / len(logs)):.2f}" if logs else "—")
            row += f" {' / '.join(ratios)} ({len(seeds)}) |"
        lines.append(row)
        for j, b in enumerate(budgets):
            values = [x[b - 1] for x in base.values() if len(x) >= b]
            if not values:
                continue
            limit = 3 * statistics.median(values)
            for v in above:
                mine = [x[b - 1] for x in cell.get(v, {}).values() if len(x) >= b]
                above[v][j] += sum(x > limit for x in mine)
                runs[v][j] += len(mine)
    lines.append("")
    lines += [
        f"- `{v}`: runs above 3x the default's median of their cell: "
        + ", ".join(
            f"{n} of {t} after {b} answers"
            for n, t, b in zip(above[v], runs[v], budgets)
        )
        for v in above
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:  # noqa: D103
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS)
    )
    p.add_argument("--problems", nargs="+", default=list(pbo_regret.PROBLEMS))
    p.add_argument("--sigmas", nargs="+", type=float, default=list(pbo_regret.SIGMAS))
    p.add_argument("--seeds", type=int, default=20, help="the first N tuning seeds")
    p.add_argument("--answers", type=int, default=BUDGETS[-1])
    p.add_argument(
        "--shard", type=lambda s: tuple(map(int, s.split("/"))), default=(0, 1)
    )
    p.add_argument("--store", type=Path, default=STORE)
    p.add_argument("--compare", action="store_true", help="print the table")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> str | None:
    r"""Run the variants (or, with ``--compare``, return the table)."""
    args = parse_args(argv)
    if not args.compare:
        run(args)
        return None
    text = compare(pbo_regret.load(args.store))
    print(text)
    return text


if __name__ == "__main__":
    main()
