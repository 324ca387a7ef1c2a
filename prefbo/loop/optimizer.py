r"""Ask/tell preferential Bayesian optimisation with a durable session log.

:class:`PreferentialOptimizer` asks ``q`` options at a time, is told which one
was chosen (stored as the comparisons "winner ≻ each other option"), refits a
preference model and recommends the design with the highest posterior mean.

Determinism: the state is a pure function of the answers told so far. Each
question is computed under a torch RNG forked and seeded by ``(seed, number
of answers)``, and each model fit under one seeded by ``(seed, number of
answers at that fit)`` from fresh default hyperparameters, so the same answers
give the same next question, whether told in one process or replayed from the
log by :meth:`PreferentialOptimizer.resume`, and whatever ``best()`` calls
came in between. Undoing an answer returns to the earlier state (the same
question is asked again).

Example:
    >>> opt = PreferentialOptimizer(bounds, strategy="eubo", log_path="s.jsonl")
    >>> for _ in range(20):
    ...     X = opt.ask()                     # q x d
    ...     opt.tell(person.compare(X[0], X[1]))
    >>> x_best, mean, sd = opt.best()
"""

from __future__ import annotations

import copy
import inspect
import json
import operator
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.acquisition.max_value_entropy_search import qMaxValueEntropy
from botorch.acquisition.preference import qExpectedUtilityOfBestOption
from botorch.exceptions.errors import ModelFittingError
from botorch.exceptions.warnings import OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from botorch.utils.transforms import t_batch_mode_transform
from linear_operator.utils.warnings import NumericalWarning as LONumericalWarning
from torch import Tensor
from torch.quasirandom import SobolEngine

from prefbo.acquisition import FastAnalyticEUBO, gen_candidates_eubo, maximize_eubo
from prefbo.acquisition.bald import PairwiseBALD
from prefbo.acquisition.thompson import thompson_batch
from prefbo.data.containers import PairwiseComparisons
from prefbo.data.validation import check_bounds, check_int
from prefbo.exceptions import (
    ConvergenceWarning,
    InputDataError,
    NumericalWarning,
    UnsupportedError,
)
from prefbo.fit.variational import fit_variational
from prefbo.kernels.defaults import default_preference_covar_module
from prefbo.likelihoods.pairwise import PairwiseLikelihood
from prefbo.loop.session import SessionLog, read_session_log
from prefbo.mlls import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.models import PairwiseEPGP, PairwiseLaplaceGP, SkewGP
from prefbo.models.variational import VariationalPreferenceGP

MODELS = ("laplace", "ep", "skew", "variational")
STRATEGIES = ("eubo", "qeubo", "bald", "mes", "ts", "random")
PAIR_ONLY = ("eubo", "bald", "mes")
EUBO_OPTIMIZERS = ("torch", "scipy")
DEFAULT_ACQF_OPTIONS = {
    "optimizer": "scipy",
    "num_restarts": 4,
    "raw_samples": 128,
    "maxiter": 100,
    "mc_samples": 128,
    # L-BFGS-B's relative tolerance on the acquisition value (BoTorch's
    # default 2.2e-9 refines EUBO far below anything that changes a question)
    "ftol": 1e-6,
}
# L-BFGS-B options of the Laplace/EP refits: with nearly separable answers the
# evidence creeps towards the outputscale prior's cap for 50-190 evaluations;
# 30 keep the regret (paired 10-seed benchmark) at ~15 % less time per answer.
# ftol: relative change of the evidence (tens) at which a refit stops
DEFAULT_FIT_OPTIONS = {"maxfun": 30, "ftol": 1e-6}
SCIPY_FTOL = 2.220446049250313e-09  # scipy's L-BFGS-B default (older logs)
DEFAULT_SKEW_OPTIONS = {"num_samples": 256, "burnin": 50}
# model="laplace" without a covar_module: BoTorch's default kernel with the
# outputscale's box prior ending at 20 instead of 100. With nearly noiseless
# answers the exact Laplace evidence keeps rising with the outputscale (to ~80
# where BoTorch's clamped evidence stops at ~14), the curvature of decisive
# answers then vanishes, their variance stops shrinking and EUBO re-asks them;
# at 20 Branin/low's mean final regret halves (0.117 -> 0.051, paired 10-seed
# benchmark) and Hartmann3/low's drops (1.55 -> 1.42), still worse than BoTorch
# there, so EP stays the default
LAPLACE_OUTPUTSCALE_BOUNDS = (1e-2, 20.0)
# site tolerance of the loop's EP posteriors (PairwiseEPGP's default: 1e-9).
# Parallel EP converges linearly (~0.75 per sweep on these data), so 1e-9 takes
# ~25 sweeps even from the fit's sites; the moments EUBO and best() read are
# then accurate to ~1e-6, far below what changes a question
EP_POSTERIOR_TOL = 1e-6
# full-batch Adam for the small data sets of an interactive session; at every
# answer q(u) is refitted under the kernel of the latest hyperparameter fit
DEFAULT_VARIATIONAL_FIT = {"epochs": 300, "lr": 0.05, "early_stopping_patience": 30}
_SEED_MOD = 2**31 - 1


@dataclass(frozen=True)
class Answer:
    r"""One told answer: the ``q x d`` options and the chosen index."""

    seq: int
    options: Tensor
    answer: int


@contextmanager
def expected_fit_warnings() -> Iterator[None]:
    r"""Silence the warnings fitting and acquisition trigger by design.

    Near-singular kernel matrices once questions concentrate (jitter),
    linear_operator's jitter when qEUBO's options nearly coincide,
    Newton/EP iteration limits at hyperparameters visited by L-BFGS-B, and
    BoTorch's L-BFGS-B stopping on its limits (see :mod:`prefbo.loop.demo`).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message=r".*not numerically positive definite",
            category=NumericalWarning,
        )
        warnings.filterwarnings(
            "ignore", message=r"A not p\.d\., added jitter", category=LONumericalWarning
        )
        # model="variational" asks CVR for all n designs as inducing points
        # and gets the well-conditioned subset: expected, not a problem
        warnings.filterwarnings(
            "ignore",
            message=r".*inputs have residual variance above",
            category=NumericalWarning,
        )
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        warnings.filterwarnings("ignore", category=OptimizationWarning)
        yield


def _laplace_start(
    model: VariationalPreferenceGP, designs: Tensor, comps: Tensor, covar: Any
) -> None:
    r"""Start ``q(u)`` at the Laplace posterior under the same kernel.

    With a pairwise likelihood the Laplace posterior at the inducing points
    is close to the ELBO's optimum, so refitting ``q(u)`` after each answer
    takes a few Adam epochs (early stopping) instead of hundreds from the
    prior. Other likelihoods keep the prior start.
    """
    if not isinstance(model.likelihood, PairwiseLikelihood):
        return
    laplace = PairwiseLaplaceGP(
        designs, comps, likelihood=model.likelihood, covar_module=copy.deepcopy(covar)
    )
    with torch.no_grad():
        Z = model.base_variational_strategy.inducing_points
        post = laplace.posterior(Z)
        model.set_inducing_distribution(
            post.mean.squeeze(-1), post.distribution.covariance_matrix
        )


def _accept_optimizer_stops(w: warnings.WarningMessage) -> bool:
    r"""``fit_gpytorch_mll``'s ``warning_handler`` for the loop's refits.

    L-BFGS-B stopping on its line search (``ABNORMAL``) is what happens when
    nearly separable answers push the outputscale towards its prior's cap
    and the evidence flattens: the point reached is the fit. BoTorch's
    default treats it as a failure, refits from 4 random draws of the priors
    and, when they stop the same way, raises — and the loop would then keep
    the *default* hyperparameters. Here every optimiser warning is accepted
    (first attempt kept); any other warning is re-emitted as BoTorch does.
    """
    if issubclass(w.category, OptimizationWarning):
        return True
    warnings.warn_explicit(str(w.message), w.category, w.filename, w.lineno)
    return True


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    r"""Run under the CPU RNG seeded by ``seed`` (restored afterwards).

    The loop's tensors live on the CPU; seeding the default generator alone
    gives the same draws as ``torch.manual_seed`` without its per-device
    (lazy CUDA) seeding, which costs ~0.25 ms a call.
    """
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed % _SEED_MOD)
        yield


class _FixedFirst(AcquisitionFunction):
    r"""``acqf`` of ``[fixed, X]``: optimise the other options of a question."""

    def __init__(self, acqf: AcquisitionFunction, fixed: Tensor) -> None:
        super().__init__(model=acqf.model)
        self.acqf = acqf
        self.fixed = fixed  # d

    @t_batch_mode_transform()
    def forward(self, X: Tensor) -> Tensor:  # noqa: D102
        F = self.fixed.expand(*X.shape[:-2], 1, X.shape[-1])  # b x 1 x d
        return self.acqf(torch.cat([F, X], dim=-2))  # b x q x d


# scipy's L-BFGS-B options (what fit_options are passed as)
LBFGSB_OPTIONS = (
    "maxcor",
    "ftol",
    "gtol",
    "eps",
    "maxfun",
    "maxiter",
    "maxls",
    "finite_diff_rel_step",
    "disp",
    "iprint",
)
_MODEL_CLASSES = {
    "laplace": PairwiseLaplaceGP,
    "ep": PairwiseEPGP,
    "skew": SkewGP,
    "variational": VariationalPreferenceGP,
}


def _check_keys(name: str, given: dict[str, Any], known: Any) -> None:
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise InputDataError(
            f"{name} has unknown key(s) {unknown}; expected some of {sorted(known)}."
        )


def _constructor_keywords(cls: type) -> set[str] | None:
    r"""Keyword arguments ``cls(...)`` accepts, following ``**options`` passed
    on to base classes; ``None`` if some ``__init__`` takes arbitrary ones."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        names |= {
            p.name
            for p in params
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
        }
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return names
        if klass.__module__.split(".")[0] != "prefbo":
            return None  # a library's **kwargs: not checked here
    return None


def _check_model_options(model: str, options: dict[str, Any]) -> None:
    r"""Unknown ``model_options`` keys raise now, not at the first model built
    (after the log header is written)."""
    known = _constructor_keywords(_MODEL_CLASSES[model])
    if known is None:
        return
    known -= {"datapoints", "comparisons", "data"}  # the loop passes these
    if model == "variational":
        known.add("fit")  # fit_variational's settings, taken by the loop
    _check_keys(f"model_options for model={model!r}", options, known)


def _check_options(options: Tensor, bounds: Tensor) -> None:
    r"""A told ``q x d`` question: finite, inside the box, options distinct."""
    if not bool(torch.isfinite(options).all()):
        raise InputDataError(f"options must be finite; got {options.tolist()}.")
    lo, hi = bounds
    outside = (options < lo) | (options > hi)
    if bool(outside.any()):
        i, j = (int(v) for v in outside.nonzero()[0])
        raise InputDataError(
            f"options must lie in the box bounds; option {i} has x[{j}] = "
            f"{float(options[i, j])!r} outside [{float(lo[j])!r}, {float(hi[j])!r}]."
        )
    q = options.shape[0]
    same = (options.unsqueeze(0) == options.unsqueeze(1)).all(-1)
    same = same & ~torch.eye(q, dtype=torch.bool)
    if bool(same.any()):
        i, j = (int(v) for v in same.nonzero()[0])
        raise InputDataError(
            f"options must be distinct designs; options {i} and {j} are the same "
            f"point {options[i].tolist()} (an answer about a design and itself "
            "says nothing)."
        )


def _pairs_from(tells: list[Answer]) -> tuple[Tensor, Tensor]:
    r"""Designs (``n x d``, exact duplicates merged) and ``m x 2`` comparisons."""
    index: dict[tuple[float, ...], int] = {}
    rows = []
    for t in tells:
        idx = [index.setdefault(tuple(x.tolist()), len(index)) for x in t.options]
        w = idx[t.answer]
        rows += [[w, j] for j in idx if j != w]
    designs = torch.tensor(list(index), dtype=torch.float64)
    return designs, torch.tensor(rows, dtype=torch.long).reshape(-1, 2)


def _acqf_scipy_options(o: dict[str, Any], seed: int) -> dict[str, Any]:
    r"""``optimize_acqf`` options from the loop's ``acqf_options`` ``o``.

    ``ftol`` (``None``: BoTorch's default) is passed the way BoTorch's
    L-BFGS-B path of this call takes it: its batched fast path needs
    ``factr=None`` beside ``ftol``, scipy's ``minimize`` only ``ftol``.
    """
    options: dict[str, Any] = {"seed": seed % _SEED_MOD, "maxiter": o["maxiter"]}
    ftol = o.get("ftol")
    if ftol is None:
        return options
    tol: dict[str, Any] = {"ftol": float(ftol)}
    try:
        from botorch.generation.gen import get_reasons_against_fast_path
    except ImportError:  # no batched fast path in this BoTorch
        return {**options, **tol}
    fast = {"maxiter": o["maxiter"], **tol, "factr": None}
    if not get_reasons_against_fast_path(
        method="L-BFGS-B", with_grad=True, minimize_options=fast, timeout_sec=None
    ):
        tol["factr"] = None
    return {**options, **tol}


class PreferentialOptimizer:
    r"""Ask/tell preferential BO over a box (see the module docstring)."""

    def __init__(
        self,
        bounds: Tensor | list,
        model: str = "ep",
        strategy: str = "eubo",
        q: int = 2,
        keep_winner: bool = False,
        refit_every: int = 1,
        seed: int = 0,
        log_path: str | os.PathLike | None = None,
        initial_random: int = 2,
        *,
        warm_start_fits: bool = True,
        fit_options: dict[str, Any] | None = None,
        acqf_options: dict[str, Any] | None = None,
        model_options: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        r"""
        Args:
            bounds: ``2 x d`` box ``[lower, upper]`` (stored as float64).
            model: ``"ep"`` (:class:`~prefbo.models.PairwiseEPGP`, the
                default: in the paired 10-seed benchmark it is worse than
                BoTorch on no cell, with the lower mean on all 8),
                ``"laplace"`` (:class:`~prefbo.models.PairwiseLaplaceGP`,
                ~1.1x faster per answer, worse on no cell, better on one,
                with the lower mean on 4 of 8; unless ``model_options`` give a
                ``covar_module``, BoTorch's default kernel with the outputscale
                prior's box ending at 20, ``LAPLACE_OUTPUTSCALE_BOUNDS``: with
                nearly noiseless answers the exact Laplace approximation stops
                shrinking the variance of pairs it has seen decisively and
                EUBO repeats questions, which the cap reduces but does not
                remove — see ``benchmarks/results/pbo_regret.md``), ``"skew"``
                (:class:`~prefbo.models.SkewGP`) or ``"variational"``
                (:class:`~prefbo.models.VariationalPreferenceGP` with all
                designs as inducing points unless ``model_options`` say
                otherwise; hyperparameters and ``q(u)`` by full-batch Adam on
                the ELBO, ``q(u)`` refitted under the fitted kernel at every
                answer; ``model_options["fit"]`` overrides the settings of
                :func:`~prefbo.fit.fit_variational`).
            strategy: ``"eubo"`` (analytic EUBO, ``q=2``), ``"qeubo"`` (MC
                qEUBO), ``"bald"`` (pairwise BALD under the model's own answer
                likelihood, :class:`~prefbo.acquisition.PairwiseBALD`,
                ``q=2``), ``"mes"`` (the
                design of largest max-value entropy of the utility, ``q = 1``
                on 512 Sobol candidates, against the current best or the kept
                winner; ``q=2``), ``"ts"`` (the
                current best, or kept winner, against ``q-1`` Thompson
                maximisers) or ``"random"``.
            q: Options per question, ``>= 2``.
            keep_winner: Put the previous answer's winner first in the next
                question and choose only the other ``q-1`` options.
            refit_every: Refit hyperparameters after every this many answers
                (the model is always conditioned on all answers).
            warm_start_fits: Start each refit at the hyperparameters of the
                previous one (the fit at ``c`` answers starts from the fit at
                ``c - refit_every``, a chain that depends on the answers
                alone, so a resumed session recomputes it exactly). With
                nearly separable answers the evidence keeps rising towards the
                outputscale prior's cap and a fit from the defaults crawls
                there in 100+ L-BFGS-B evaluations at every refit; from the
                previous fit it takes a few. ``False``: every refit starts at
                the model's default hyperparameters.
            fit_options: scipy L-BFGS-B ``options`` of the Laplace and EP
                hyperparameter refits (``fit_gpytorch_mll``'s
                ``optimizer_kwargs["options"]``); default ``{"maxfun": 30,
                "ftol": 1e-6}`` (at most 30 evaluations: separable answers
                otherwise let the evidence creep towards the outputscale cap
                for up to 190; stop once the evidence changes by less than
                1e-6 of itself instead of scipy's 2.2e-9).
                The refits (``fit_gpytorch_mll`` on prefbo's models) also
                bound every box-prior hyperparameter (the outputscale) to its
                box (:func:`prefbo.fit.box_prior_bounds`), which pins it at
                the cap where L-BFGS-B would crawl along the prior's wall:
                about half the evaluations.
            seed: Seed of every random choice.
            log_path: Append-only session log to create (see
                :mod:`prefbo.loop.session`); ``None`` for none.
            initial_random: Questions drawn uniformly at random before the
                strategy takes over; at least 1 unless ``strategy="random"``
                (the first question comes before any answer, with no model).
            acqf_options: ``num_restarts``, ``raw_samples``, ``maxiter`` and
                ``ftol`` (L-BFGS-B's relative tolerance on the acquisition
                value, default 1e-6; ``None``: BoTorch's 2.2e-9) of the
                acquisition maximiser and ``mc_samples`` of qEUBO.
                ``optimizer`` chooses the maximiser of strategy ``"eubo"``:
                ``"scipy"`` (default) BoTorch's ``optimize_acqf`` (L-BFGS-B;
                ``raw_samples`` random pairs) on
                :class:`~prefbo.acquisition.FastAnalyticEUBO` with
                :func:`~prefbo.acquisition.gen_candidates_eubo` (BoTorch's EUBO
                values and L-BFGS-B path: the same question, 10-12x faster
                than BoTorch's class), ``"torch"``
                :func:`~prefbo.acquisition.maximize_eubo` (``raw_samples``
                Sobol designs, every pair of them scored, the best
                ``num_restarts`` distinct pairs refined by a batched projected
                Newton ascent of at most ``maxiter`` iterations: 6-7x faster
                and finds EUBO values as high or higher). ``"torch"`` is not
                the default because finding EUBO's global maximum is worse for
                regret here: on Branin EUBO's maximiser keeps asking along one
                edge of the box, and the local optima ``optimize_acqf`` stops
                at now and then are what explores (``make demo``, seeds 0-9:
                median final regret 0.079 vs 0.032-0.038; single runs are
                chaotic, a rounding-level change can move one seed a lot).
                Other strategies always use ``optimize_acqf`` (or, for
                ``"ts"``, the batched ascent of
                :func:`~prefbo.acquisition.thompson_batch`).
            model_options: Keyword arguments of the model's constructor.
            metadata: JSON-serialisable data stored in the log header (e.g.
                variable names), available as ``self.metadata``.
        """
        bounds = torch.as_tensor(bounds, dtype=torch.float64)
        check_bounds(bounds)
        if model not in MODELS:
            raise InputDataError(f"model must be one of {MODELS}; got {model!r}.")
        if strategy not in STRATEGIES:
            raise InputDataError(
                f"strategy must be one of {STRATEGIES}; got {strategy!r}."
            )
        check_int("q", q, 2)
        if strategy in PAIR_ONLY and q != 2:
            raise UnsupportedError(
                f"strategy={strategy!r} asks pairs only (q=2); got q={q}. Use "
                "strategy='qeubo' for larger choice sets."
            )
        if strategy == "mes" and model == "skew":
            raise UnsupportedError(
                "strategy='mes' needs a Gaussian posterior; model='skew' gives a "
                "sample-based one. Use model='ep' (or 'laplace')."
            )
        if strategy == "ts" and model == "skew":
            raise UnsupportedError(
                "strategy='ts' needs pathwise samples, which model='skew' does not "
                "provide; use model='laplace' or 'ep'."
            )
        check_int("refit_every", refit_every, 1)
        check_int("seed", seed, None)
        # the first question comes before any answer: no model to acquire with
        check_int("initial_random", initial_random, 0 if strategy == "random" else 1)
        self.bounds = bounds
        self.model_name, self.strategy, self.q = model, strategy, q
        self.keep_winner, self.refit_every = bool(keep_winner), refit_every
        self.seed, self.initial_random = int(seed), initial_random
        if acqf_options is not None and not isinstance(acqf_options, dict):
            raise InputDataError(
                f"acqf_options must be a dict; got {type(acqf_options).__name__}."
            )
        _check_keys("acqf_options", acqf_options or {}, DEFAULT_ACQF_OPTIONS)
        self.acqf_options = {**DEFAULT_ACQF_OPTIONS, **(acqf_options or {})}
        if self.acqf_options["optimizer"] not in EUBO_OPTIMIZERS:
            raise InputDataError(
                f"acqf_options['optimizer'] must be one of {EUBO_OPTIMIZERS}; got "
                f"{self.acqf_options['optimizer']!r}."
            )
        self.model_options = dict(model_options or {})
        _check_model_options(model, self.model_options)
        self.metadata = dict(metadata or {})
        self.failed_fits = 0
        self._tells: list[Answer] = []
        self._pending: Tensor | None = None
        self._model = None
        self.warm_start_fits = bool(warm_start_fits)
        if fit_options is not None and not isinstance(fit_options, dict):
            raise InputDataError(
                f"fit_options must be a dict of L-BFGS-B options; got {fit_options!r}."
            )
        _check_keys("fit_options", fit_options or {}, LBFGSB_OPTIONS)
        self.fit_options = {**DEFAULT_FIT_OPTIONS, **(fit_options or {})}
        self._fits: dict[int, Any] = {}  # answers -> fitted kernel
        # answers -> where the fit's last evaluation left the approximation (EP
        # sites, a Laplace mode): the start of the next fit and of the models
        # built from that fit
        self._fit_starts: dict[int, Any] = {}
        self._log = None
        if log_path is not None:
            config = self.config
            for key, value in config.items():
                try:
                    json.dumps(value, allow_nan=False)
                except (TypeError, ValueError) as e:
                    raise InputDataError(
                        f"{key} cannot be stored in the session log at log_path "
                        f"(it must be JSON-serialisable: {e}); pass plain values "
                        "or log_path=None."
                    ) from None
            self._log = SessionLog.create(log_path, config)

    # ------------------------------------------------------------ properties
    @property
    def config(self) -> dict[str, Any]:
        r"""The constructor's settings, JSON-serialisable (the log header)."""
        return {
            "bounds": self.bounds.tolist(),
            "model": self.model_name,
            "strategy": self.strategy,
            "q": self.q,
            "keep_winner": self.keep_winner,
            "refit_every": self.refit_every,
            "seed": self.seed,
            "initial_random": self.initial_random,
            "warm_start_fits": self.warm_start_fits,
            "fit_options": self.fit_options,
            "acqf_options": self.acqf_options,
            "model_options": self.model_options,
            "metadata": self.metadata,
        }

    @property
    def history(self) -> list[Answer]:
        r"""The answers in force (undone ones removed), oldest first (copies:
        editing them does not change the optimizer's data)."""
        return [Answer(t.seq, t.options.clone(), t.answer) for t in self._tells]

    @property
    def dim(self) -> int:
        r"""Number of variables ``d``."""
        return self.bounds.shape[-1]

    def data(self) -> tuple[Tensor, Tensor]:
        r"""``n x d`` float64 designs and ``m x 2`` ``[winner, loser]`` indices."""
        return _pairs_from(self._tells)

    # ------------------------------------------------------------ ask / tell
    def ask(self) -> Tensor:
        r"""The next question (the same one until it is answered).

        Returns:
            A ``q x d`` float64 tensor of options.
        """
        if self._pending is None:
            self._pending = self._next_question()
        return self._pending.clone()

    def tell(self, answer: int, options: Tensor | None = None) -> None:
        r"""Record which option was chosen; logged durably before returning.

        Args:
            answer: Index in ``[0, q)`` of the chosen option.
            options: The ``q x d`` options the answer refers to; default the
                pending question of :meth:`ask`.

        Raises:
            InputDataError: ``answer`` is not an int index of ``options``, or
                ``options`` are not ``q x d`` (``q >= 2``), not finite, outside
                the box, or not distinct designs.
        """
        if options is None:
            if self._pending is None:
                raise InputDataError(
                    "tell(answer) needs a pending question; call ask() first or "
                    "pass options=<q x d tensor>."
                )
            options = self._pending
        options = torch.as_tensor(options, dtype=torch.float64)
        if options.ndim != 2 or options.shape[-1] != self.dim or options.shape[0] < 2:
            raise InputDataError(
                f"options must be a q x d tensor with q >= 2 and d={self.dim}; got "
                f"shape {tuple(options.shape)}."
            )
        try:  # ints, NumPy and 0-d torch integers; not bools or floats
            if isinstance(answer, bool) or (
                isinstance(answer, Tensor) and answer.dtype == torch.bool
            ):
                raise TypeError
            answer = operator.index(answer)
        except TypeError:
            raise InputDataError(f"answer must be an int; got {answer!r}.") from None
        if not 0 <= answer < options.shape[0]:
            raise InputDataError(
                f"answer must index one of the {options.shape[0]} options "
                f"(0..{options.shape[0] - 1}); got answer={answer}."
            )
        _check_options(options, self.bounds)
        seq = len(self._tells)
        if self._log is not None:
            record = {"type": "tell", "options": options.tolist(), "answer": answer}
            seq = self._log.append(record)
        self._apply_tell(options, answer, seq)

    def undo(self) -> Answer:
        r"""Withdraw the latest answer (logged as an ``undo`` record).

        Returns:
            The withdrawn answer; its question is asked again next.
        """
        if not self._tells:
            raise InputDataError("undo() needs an answer to withdraw; none is left.")
        if self._log is not None:
            self._log.append({"type": "undo"})
        return self._apply_undo()

    def _apply_tell(self, options: Tensor, answer: int, seq: int) -> None:
        self._tells.append(Answer(seq, options.clone(), answer))
        self._pending, self._model = None, None

    def _apply_undo(self) -> Answer:
        last = self._tells.pop()
        self._pending, self._model = None, None
        for c in [c for c in self._fits if c > len(self._tells)]:
            del self._fits[c]  # its answers are no longer all in force
            self._fit_starts.pop(c, None)
        return last

    # ------------------------------------------------------------ resume
    @classmethod
    def resume(
        cls, log_path: str | os.PathLike, **expected: Any
    ) -> PreferentialOptimizer:
        r"""Rebuild an optimizer from its log and keep appending to it.

        A torn last line (a crash mid-write) is reported with a
        :class:`~prefbo.loop.session.SessionLogWarning` naming the line and cut
        from the file; every earlier answer is kept.

        Args:
            log_path: A log written by an optimizer created with ``log_path``.
            **expected: Settings to check against the log's header (e.g.
                ``seed=0``); a mismatch raises ``InputDataError``.

        Returns:
            The optimizer in the state after the logged answers: its next
            :meth:`ask` equals the one the logging process would have made.
        """
        header, records = read_session_log(log_path, repair=True)
        config = dict(header["config"])
        # logs written before these settings existed: keep their behaviour
        config.setdefault("warm_start_fits", False)
        config.setdefault("fit_options", {"maxfun": 15000})  # scipy's default
        if isinstance(config.get("fit_options"), dict):
            config["fit_options"] = {"ftol": SCIPY_FTOL, **config["fit_options"]}
        if isinstance(config.get("acqf_options"), dict):
            config["acqf_options"] = {
                "optimizer": "scipy",
                "ftol": None,  # BoTorch's default
                **config["acqf_options"],
            }
        for key, value in expected.items():
            stored = config.get(key, "<missing>")
            if isinstance(value, Tensor):
                value = value.tolist()
            if key not in config or stored != value:
                raise InputDataError(
                    f"resume({key}=...) expected {value!r} but the log "
                    f"{str(log_path)!r} was written with {key}={stored!r}."
                )
        opt = cls(**config)
        for rec in records:
            if rec["type"] == "tell":
                opt._apply_tell(
                    torch.tensor(rec["options"], dtype=torch.float64),
                    int(rec["answer"]),
                    rec["seq"],
                )
            elif opt._tells:  # undo
                opt._apply_undo()
        opt._log = SessionLog(log_path, len(records) + 1)
        return opt

    # ------------------------------------------------------------ model
    def _build(self, designs: Tensor, comps: Tensor, covar: Any = None) -> Any:
        opts = dict(self.model_options)
        if covar is not None:
            opts["covar_module"] = copy.deepcopy(covar)
        if self.model_name == "laplace":
            if "covar_module" not in opts:
                opts["covar_module"] = default_preference_covar_module(
                    designs.shape[-1], outputscale_bounds=LAPLACE_OUTPUTSCALE_BOUNDS
                )
            return PairwiseLaplaceGP(designs, comps, **opts)
        if self.model_name == "ep":
            return PairwiseEPGP(designs, comps, **{"tol": EP_POSTERIOR_TOL, **opts})
        if self.model_name == "variational":
            model = self._build_variational(designs, comps, opts)
            if covar is not None:  # condition q(u) on all answers, kernel fixed
                with expected_fit_warnings():
                    _laplace_start(model, designs, comps, covar)
                    self._fit_variational(model, learn_hyperparameters=False)
            return model
        opts = {**DEFAULT_SKEW_OPTIONS, "seed": self.seed, **opts}
        return SkewGP(designs, comps, **opts)

    @staticmethod
    def _build_variational(
        designs: Tensor, comps: Tensor, opts: dict[str, Any]
    ) -> VariationalPreferenceGP:
        opts = {k: v for k, v in opts.items() if k != "fit"}
        opts.setdefault("inducing_points", designs.shape[-2])
        return VariationalPreferenceGP(PairwiseComparisons(designs, comps), **opts)

    def _fit_variational(
        self, model: VariationalPreferenceGP, learn_hyperparameters: bool
    ) -> None:
        settings = {**DEFAULT_VARIATIONAL_FIT, **self.model_options.get("fit", {})}
        settings.setdefault("batch_size", max(1, model.data.num_answers))
        with torch.enable_grad():  # the model may be built under no_grad
            fit_variational(
                model,
                seed=self.seed,
                learn_hyperparameters=learn_hyperparameters,
                **settings,
            )

    def _fit(self, model: Any) -> None:
        with expected_fit_warnings(), torch.enable_grad():
            try:
                if self.model_name == "variational":
                    self._fit_variational(model, learn_hyperparameters=True)
                elif self.model_name == "skew":
                    model.fit_hyperparameters("ep")
                else:
                    mll_cls = (
                        PairwiseLaplaceMLL
                        if self.model_name == "laplace"
                        else PairwiseEPMLL
                    )
                    fit_gpytorch_mll(
                        mll_cls(model.likelihood, model),
                        warning_handler=_accept_optimizer_stops,
                        optimizer_kwargs={"options": dict(self.fit_options)},
                    )
            except ModelFittingError:  # keep the default hyperparameters
                self.failed_fits += 1
        model.eval()

    @property
    def model(self) -> Any:
        r"""The model conditioned on every answer (``None`` before the first).

        Hyperparameters come from the fit at the latest multiple of
        ``refit_every`` answers (see ``warm_start_fits``), run under an RNG
        seeded by that count.
        """
        k = len(self._tells)
        if k == 0:
            return None
        if self._model is None:
            c = k - k % self.refit_every
            designs, comps = self.data()
            kernel = self._fitted_kernel(c)
            # always rebuilt from the fitted kernel (and, for EP, the sites of
            # that fit's last evaluation as a warm start): never the fitted
            # model itself, whose cached state depends on the optimiser's path
            with _seeded(self.seed * 7919 + k), expected_fit_warnings():
                self._model = self._build(designs, comps, kernel)
            if c in self._fit_starts:  # start at the fit's sites / mode (a prefix)
                self._model.warm_start(self._fit_starts[c])
            self._model.eval()
        return self._model

    def _fitted_kernel(self, c: int) -> Any:
        r"""The kernel fitted on the first ``c`` answers (``c = 0``: defaults).

        Fits are cached per ``c``; with ``warm_start_fits`` the fit at ``c``
        starts from the one at ``c - refit_every``, computed first if missing.
        """
        if c == 0:  # the defaults, as a kernel: the model is built from one
            if 0 not in self._fits:
                with _seeded(self.seed * 7919), expected_fit_warnings():
                    self._fits[0] = self._build(*self.data()).covar_module
            return self._fits[0]
        if c in self._fits:
            return self._fits[c]
        step, first = self.refit_every, c
        while self.warm_start_fits and first > step and first - step not in self._fits:
            first -= step  # a missing link of the chain: fitted first
        for count in range(first, c + 1, step):
            start = None
            if self.warm_start_fits and count > step:
                start = self._fits[count - step]
            with _seeded(self.seed * 7919 + count), expected_fit_warnings():
                designs, comps = _pairs_from(self._tells[:count])
                fitted = self._build_for_fit(designs, comps, start)
                if start is not None and count - step in self._fit_starts:
                    fitted.warm_start(self._fit_starts[count - step])
                self._fit(fitted)
            self._fits[count] = fitted.covar_module
            last = None
            if isinstance(fitted, PairwiseEPGP):
                last = fitted.last_sites
            elif isinstance(fitted, PairwiseLaplaceGP):
                last = fitted.last_mode
            if last is not None:
                self._fit_starts[count] = last
        return self._fits[c]

    def _build_for_fit(self, designs: Tensor, comps: Tensor, start: Any) -> Any:
        r"""An unfitted model whose kernel starts at ``start`` (a copy)."""
        if start is None:
            return self._build(designs, comps)
        if self.model_name == "variational":  # no q(u) conditioning: fitted next
            opts = {**self.model_options, "covar_module": copy.deepcopy(start)}
            return self._build_variational(designs, comps, opts)
        return self._build(designs, comps, start)

    def best(self) -> tuple[Tensor, float, float]:
        r"""The told design with the highest posterior mean.

        Returns:
            ``(design, mean, sd)``: a ``d`` float64 tensor and the posterior
            mean and standard deviation of the utility there.
        """
        model = self.model
        if model is None:
            raise InputDataError("best() needs at least one answer; none was told.")
        designs, _ = self.data()
        with torch.no_grad(), expected_fit_warnings():
            post = model.posterior(designs.unsqueeze(-2))  # n x 1 x d
            mean = post.mean.reshape(-1)  # n
            sd = post.variance.reshape(-1).clamp_min(0).sqrt()  # n
        i = int(mean.argmax())
        return designs[i].clone(), float(mean[i]), float(sd[i])

    # ------------------------------------------------------------ questions
    def _uniform(self, k: int, step_seed: int) -> Tensor:
        gen = torch.Generator().manual_seed(step_seed % _SEED_MOD)
        u = torch.rand(k, self.dim, generator=gen, dtype=torch.float64)  # k x d
        return self.bounds[0] + (self.bounds[1] - self.bounds[0]) * u

    def _next_question(self) -> Tensor:
        k = len(self._tells)
        step_seed = self.seed * 1_000_003 + k
        fixed = None
        if self.keep_winner and self._tells:
            last = self._tells[-1]
            fixed = last.options[last.answer]  # d
        n_new = self.q - (fixed is not None)
        if k < self.initial_random or self.strategy == "random":
            new = self._uniform(n_new, step_seed)
        else:
            model = self.model
            with _seeded(step_seed), expected_fit_warnings():
                new = self._acquire(model, fixed, n_new, step_seed)
        if fixed is None:
            return new
        return torch.cat([fixed.unsqueeze(0), new])  # q x d

    def _acquire(
        self, model: Any, fixed: Tensor | None, n_new: int, seed: int
    ) -> Tensor:
        o = self.acqf_options
        if self.strategy == "ts":
            cand = thompson_batch(
                model,
                self.bounds,
                n_new if fixed is not None else n_new - 1,
                raw_samples=o["raw_samples"],
                num_restarts=o["num_restarts"],
                num_steps=o["maxiter"],
                seed=seed % _SEED_MOD,
            )
            if fixed is None:
                best, _, _ = self.best()
                cand = torch.cat([best.unsqueeze(0), cand])
            return cand.detach()
        if self.strategy == "mes":
            sobol = SobolEngine(
                self.bounds.shape[-1], scramble=True, seed=seed % _SEED_MOD
            )
            lo, hi = self.bounds
            candidates = lo + (hi - lo) * sobol.draw(512).to(self.bounds)
            acqf = qMaxValueEntropy(model, candidate_set=candidates)
            x, _ = optimize_acqf(
                acqf,
                bounds=self.bounds,
                q=1,
                num_restarts=o["num_restarts"],
                raw_samples=o["raw_samples"],
                options=_acqf_scipy_options(o, seed),
            )
            if fixed is not None:
                return x.detach()
            best, _, _ = self.best()
            return torch.cat([best.unsqueeze(0), x.detach()])
        if self.strategy == "eubo" and o["optimizer"] == "torch":
            new = maximize_eubo(
                model,
                self.bounds,
                previous_winner=fixed,
                raw_samples=o["raw_samples"],
                num_restarts=o["num_restarts"],
                num_steps=o["maxiter"],
                seed=seed % _SEED_MOD,
            )
            return new.detach()
        if self.strategy == "eubo":  # BoTorch's EUBO, values from pair moments
            acqf = FastAnalyticEUBO(
                model, previous_winner=None if fixed is None else fixed.unsqueeze(0)
            )
            fixed = None  # handled by BoTorch's previous_winner
        elif self.strategy == "qeubo":
            sampler = SobolQMCNormalSampler(
                torch.Size([o["mc_samples"]]), seed=seed % _SEED_MOD
            )
            acqf = qExpectedUtilityOfBestOption(pref_model=model, sampler=sampler)
        else:  # BALD under the model's own answer noise (BoTorch's assumes s = 1)
            acqf = PairwiseBALD(model)
        if fixed is not None:
            acqf = _FixedFirst(acqf, fixed)
        cand, _ = optimize_acqf(
            acqf,
            bounds=self.bounds,
            q=n_new,
            num_restarts=o["num_restarts"],
            raw_samples=o["raw_samples"],
            options=_acqf_scipy_options(o, seed),
            # BoTorch's L-BFGS-B on the written-out EUBO value and gradient
            # (gen_candidates_scipy's iterates, to rounding; qEUBO, BALD and
            # the fixed-first wrapper go to gen_candidates_scipy itself)
            gen_candidates=gen_candidates_eubo,
        )
        return cand.detach()
