r"""The loop's models: fitted on the answers, in the unit cube of the box.

:class:`FittedModels` is the part of
:class:`~prefbo.loop.PreferentialOptimizer` that turns its answers into
models (their inputs from the optimiser's :class:`~prefbo.loop.box.DesignBox`):
the chain of hyperparameter fits (one per ``refit_every`` answers, each
warm-started from the previous one and run under an RNG seeded by its answer
count), the model conditioned on every answer, and its predictions and
recommendation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from botorch.exceptions.errors import ModelFittingError
from torch import Tensor

from prefbo.exceptions import InputDataError
from prefbo.loop.answers import Answer, check_designs, pairs_from
from prefbo.loop.box import DesignBox
from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.loop.options import SEED_MOD
from prefbo.loop.settings import LoopSettings
from prefbo.utils.seeds import fit_seed
from prefbo.utils.threads import limited


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    r"""Run under the CPU RNG seeded by ``seed`` (restored afterwards).

    The loop's tensors live on the CPU; seeding the default generator alone
    gives the same draws as ``torch.manual_seed`` without its per-device
    (lazy CUDA) seeding.
    """
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed % SEED_MOD)
        yield


class FittedModels:
    r"""The models of an optimiser's answers (see the module docstring), held
    by :class:`~prefbo.loop.PreferentialOptimizer` as ``opt.models``.

    It holds the answers in force (:attr:`answers`, told with :meth:`add`
    and withdrawn with :meth:`withdraw`) and the virtual comparisons of the
    question being computed (:attr:`proposed`, :meth:`propose`,
    :meth:`clear_proposed`); the model follows them.

    Args:
        settings: The optimiser's settings (model kind and options, seed,
            ``refit_every``, ``warm_start_fits``, ``fit_options``, ``q``).
        box: The designs' box and the models' coordinates of them.
    """

    def __init__(self, settings: LoopSettings, box: DesignBox) -> None:
        self.settings, self.box = settings, box
        self.kind = settings.model_kind(settings.model_options, settings.seed)
        #: The answers in force, oldest first (edit only through add/withdraw).
        self.answers: list[Answer] = []
        #: The ``2 x d`` virtual comparisons ``[inner, face]`` made for the
        #: question being computed (:mod:`prefbo.loop.boundary`).
        self.proposed: list[Tensor] = []
        #: answers -> the model fitted on the first that many (0: the
        #: defaults): its kernel and approximation start the next fit and the
        #: models built from it
        self.fits: dict[int, Any] = {}
        #: Refits that failed (their starting hyperparameters kept).
        self.failed_fits = 0
        self._model: Any = None

    def add(self, answer: Answer) -> None:
        r"""Hold one more answer (the model follows it)."""
        self.answers.append(answer)
        self._model = None

    def withdraw(self) -> Answer:
        r"""Drop the latest answer, and every fit it was part of.

        Returns:
            The withdrawn answer.
        """
        last = self.answers.pop()
        self._model = None
        for c in [c for c in self.fits if c > len(self.answers)]:
            del self.fits[c]  # its answers are no longer all in force
        return last

    def propose(self, pairs: list[Tensor]) -> None:
        r"""Add virtual comparisons (``2 x d`` designs ``[inner, face]``
        each) for the question being computed; the model follows them."""
        self.proposed += pairs
        self._model = None

    def clear_proposed(self) -> None:
        r"""Drop the virtual comparisons of :meth:`propose`: the model of the
        answers alone."""
        if self.proposed:
            self.proposed, self._model = [], None

    def data(self) -> tuple[Tensor, Tensor]:
        r"""``n x d`` float64 designs and ``m x 2`` ``[winner, loser]`` indices."""
        return pairs_from(self.answers)

    def model_data(self, tells: list[Answer] | None = None) -> tuple[Tensor, Tensor]:
        r"""The models' designs and comparisons of ``tells`` (default: every
        answer, and the virtual comparisons of the question being computed),
        each answer after the virtual comparisons made for its question
        (:mod:`prefbo.loop.boundary`)."""
        designs, comps = pairs_from(self.model_events(tells))
        return self.box.to_model(designs), comps

    def model_events(self, tells: list[Answer] | None = None) -> list[Answer]:
        r"""The answers of :meth:`model_data` in its order, a virtual
        comparison as an :class:`Answer` with ``seq = -1``."""
        events: list[Answer] = []
        for t in self.answers if tells is None else tells:
            if t.virtual is not None:
                events += [Answer(-1, pair, 0) for pair in t.virtual]
            events.append(t)
        if tells is None:
            events += [Answer(-1, pair, 0) for pair in self.proposed]
        return events

    def predict(self, X: Tensor) -> tuple[Tensor, Tensor]:
        r"""Posterior mean and standard deviation of the utility at designs.

        Args:
            X: ``n x d`` designs of the box (a tensor).

        Returns:
            ``(mean, sd)``: two ``n`` float64 tensors.

        Raises:
            InputTypeError: ``X`` is not a real tensor.
            InputDataError: No answer was told yet, or ``X`` is not ``n x d``
                or has a design that is not finite or outside the box (where
                the model knows nothing but its prior).
        """
        X = check_designs("X", X, self.box.bounds)
        if not self.answers:
            raise InputDataError("predict() needs at least one answer; none was told.")
        return self.mean_sd(self.box.to_model(X))

    @property
    def work_size(self) -> int:
        r"""The latent values of the model (at most ``q`` per answer and
        question, virtual comparisons included): the size by which
        :func:`prefbo.utils.threads.limited` runs its fits and questions."""
        answers = self.answers
        virtual = sum(0 if t.virtual is None else len(t.virtual) for t in answers)
        return self.settings.q * (len(answers) + 1) + 2 * virtual

    def mean_sd(self, Z: Tensor) -> tuple[Tensor, Tensor]:
        r"""Posterior mean and sd of the utility at ``n x d`` model inputs."""
        with torch.no_grad(), expected_fit_warnings(), limited(self.work_size):
            post = self.model.posterior(Z.unsqueeze(-2))  # n x 1 x d
            mean = post.mean.reshape(-1)
            sd = post.variance.reshape(-1).clamp_min(0).sqrt()
        return mean, sd

    @property
    def model(self) -> Any:
        r"""The model conditioned on every answer (``None`` before the first).

        The model's inputs are the unit cube of the box
        (:meth:`DesignBox.to_model <prefbo.loop.box.DesignBox.to_model>`;
        the box itself if ``unit_cube`` is off): every model kind's default
        priors, like BoTorch's, are set for inputs in ``[0, 1]^d``, so the
        same answers give the same model whatever the box's units.
        :meth:`predict` takes designs of the box.

        Hyperparameters come from the fit at the latest multiple of
        ``refit_every`` answers (see ``warm_start_fits``), run under an RNG
        seeded by that count.
        """
        k = len(self.answers)
        if k == 0:
            return None
        if self._model is None:
            c = k - k % self.settings.refit_every
            designs, comps = self.model_data()
            fitted = self.fitted(c)
            # always rebuilt from the fitted kernel (and started at the fit's
            # approximation): never the fitted model itself, whose cached
            # state depends on the optimiser's path
            with seeded(fit_seed(self.settings.seed, k)), expected_fit_warnings():
                self._model = self.kind.build(designs, comps, fitted.covar_module)
            if c > 0:  # the fit's data are a prefix of these
                self.kind.warm_start(self._model, fitted)
            self._model.eval()
        return self._model

    def release_fits(self) -> None:
        r"""Free every cached fit but the latest: the next refit starts from
        it as before; after an
        :meth:`~prefbo.loop.PreferentialOptimizer.undo` below it the chain is
        refitted from the defaults, to the same hyperparameters (each fit is
        seeded by its count), only slower."""
        if self.fits:
            latest = max(self.fits)
            self.fits = {latest: self.fits[latest]}

    def fitted(self, c: int) -> Any:
        r"""The model fitted on the first ``c`` answers (``c = 0``: an unfitted
        model with the defaults, for its kernel).

        Fits are cached per ``c``; with ``warm_start_fits`` the fit at ``c``
        starts from the one at ``c - refit_every``, computed first if missing.
        """
        if c == 0:
            if 0 not in self.fits:
                with seeded(fit_seed(self.settings.seed)), expected_fit_warnings():
                    self.fits[0] = self.kind.build(*self.model_data(self.answers))
            return self.fits[0]
        if c in self.fits:
            return self.fits[c]
        warm, step, first = self.settings.warm_start_fits, self.settings.refit_every, c
        while warm and first > step and first - step not in self.fits:
            first -= step  # a missing link of the chain: fitted first
        for count in range(first, c + 1, step):
            previous = None
            if warm and count > step:
                previous = self.fits[count - step]
            with seeded(fit_seed(self.settings.seed, count)), expected_fit_warnings():
                designs, comps = self.model_data(self.answers[:count])
                start = None if previous is None else previous.covar_module
                fitted = self.kind.build_for_fit(designs, comps, start)
                if previous is not None:
                    self.kind.warm_start(fitted, previous)
                self.fit(fitted)
            self.fits[count] = fitted
        return self.fits[c]

    def fit(self, model: Any) -> None:
        r"""Fit ``model``'s hyperparameters in place (the model kind's fit
        with ``fit_options``); a failed fit keeps the starting ones and is
        counted in :attr:`failed_fits`."""
        with expected_fit_warnings(), torch.enable_grad(), limited(self.work_size):
            try:
                self.kind.fit(model, self.settings.fit_options)
            except ModelFittingError:  # keep the starting hyperparameters
                self.failed_fits += 1
        model.eval()

    def best(self) -> tuple[Tensor, float, float]:
        r"""The told design with the highest posterior mean.

        Returns:
            ``(design, mean, sd)``: a ``d`` float64 tensor and the posterior
            mean and standard deviation of the utility there.
        """
        if not self.answers:
            raise InputDataError("best() needs at least one answer; none was told.")
        designs, _ = self.data()  # told, so checked at tell
        mean, sd = self.mean_sd(self.box.to_model(designs))  # n, n
        i = int(mean.argmax())
        return designs[i].clone(), float(mean[i]), float(sd[i])
