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
    r"""Models of an optimiser's answers (a mixin of
    :class:`~prefbo.loop.PreferentialOptimizer`, which holds ``bounds``, the
    answers ``_tells``, the model kind ``_kind`` and the fit settings)."""

    bounds: Tensor
    box: DesignBox
    seed: int
    refit_every: int
    warm_start_fits: bool
    fit_options: dict[str, Any]
    failed_fits: int
    _tells: list[Answer]
    _proposed: list[Tensor]
    _fits: dict[int, Any]
    _model: Any
    _kind: Any

    def data(self) -> tuple[Tensor, Tensor]:
        r"""``n x d`` float64 designs and ``m x 2`` ``[winner, loser]`` indices."""
        return pairs_from(self._tells)

    def to_unit(self, X: Tensor) -> Tensor:
        r"""Designs of the box as points of the unit cube (the models' inputs;
        :meth:`DesignBox.to_unit <prefbo.loop.box.DesignBox.to_unit>`).

        Args:
            X: ``... x d`` designs (a tensor; not checked: designs outside the
                box map outside the cube).

        Returns:
            ``(X - lower) / (upper - lower)``, float64.
        """
        return self.box.to_unit(X)

    def from_unit(self, Z: Tensor) -> Tensor:
        r"""Points of the unit cube as designs of the box (inverse of
        :meth:`to_unit` on the cube; the result is clamped to the box, which
        also moves points given outside the cube onto its faces).

        Args:
            Z: ``... x d`` points of ``[0, 1]^d``.

        Returns:
            ``lower + (upper - lower) Z``, float64.
        """
        return self.box.from_unit(Z)

    def _model_data(self, tells: list[Answer] | None = None) -> tuple[Tensor, Tensor]:
        r"""The models' designs and comparisons of ``tells`` (default: every
        answer, and the virtual comparisons of the question being computed),
        each answer after the virtual comparisons made for its question
        (:mod:`prefbo.loop.boundary`)."""
        designs, comps = pairs_from(self._model_events(tells))
        return self.box.to_model(designs), comps

    def _model_events(self, tells: list[Answer] | None = None) -> list[Answer]:
        r"""The answers of :meth:`_model_data` in its order, a virtual
        comparison as an :class:`Answer` with ``seq = -1``."""
        events: list[Answer] = []
        for t in self._tells if tells is None else tells:
            if t.virtual is not None:
                events += [Answer(-1, pair, 0) for pair in t.virtual]
            events.append(t)
        if tells is None:
            events += [Answer(-1, pair, 0) for pair in self._proposed]
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
        X = check_designs("X", X, self.bounds)
        if not self._tells:
            raise InputDataError("predict() needs at least one answer; none was told.")
        return self._mean_sd(self.box.to_model(X))

    @property
    def work_size(self) -> int:
        r"""The latent values of the model (at most ``q`` per answer and
        question, virtual comparisons included): the size by which
        :func:`prefbo.utils.threads.limited` runs its fits and questions."""
        virtual = sum(0 if t.virtual is None else len(t.virtual) for t in self._tells)
        return self.q * (len(self._tells) + 1) + 2 * virtual

    def _mean_sd(self, Z: Tensor) -> tuple[Tensor, Tensor]:
        r"""Posterior mean and sd of the utility at ``n x d`` model inputs."""
        with torch.no_grad(), expected_fit_warnings(), limited(self.work_size):
            post = self.model.posterior(Z.unsqueeze(-2))  # n x 1 x d
            mean = post.mean.reshape(-1)
            sd = post.variance.reshape(-1).clamp_min(0).sqrt()
        return mean, sd

    @property
    def model(self) -> Any:
        r"""The model conditioned on every answer (``None`` before the first).

        The model's inputs are the unit cube of the box (:meth:`to_unit`;
        the box itself if ``unit_cube`` is off): every model kind's default
        priors, like BoTorch's, are set for inputs in ``[0, 1]^d``, so the
        same answers give the same model whatever the box's units.
        :meth:`predict` takes designs of the box.

        Hyperparameters come from the fit at the latest multiple of
        ``refit_every`` answers (see ``warm_start_fits``), run under an RNG
        seeded by that count.
        """
        k = len(self._tells)
        if k == 0:
            return None
        if self._model is None:
            c = k - k % self.refit_every
            designs, comps = self._model_data()
            fitted = self._fitted(c)
            # always rebuilt from the fitted kernel (and started at the fit's
            # approximation): never the fitted model itself, whose cached
            # state depends on the optimiser's path
            with seeded(fit_seed(self.seed, k)), expected_fit_warnings():
                self._model = self._kind.build(designs, comps, fitted.covar_module)
            if c > 0:  # the fit's data are a prefix of these
                self._kind.warm_start(self._model, fitted)
            self._model.eval()
        return self._model

    def release_fits(self) -> None:
        r"""Free every cached fit but the latest: the next refit starts from
        it as before; after an
        :meth:`~prefbo.loop.PreferentialOptimizer.undo` below it the chain is
        refitted from the defaults, to the same hyperparameters (each fit is
        seeded by its count), only slower."""
        if self._fits:
            latest = max(self._fits)
            self._fits = {latest: self._fits[latest]}

    def _fitted(self, c: int) -> Any:
        r"""The model fitted on the first ``c`` answers (``c = 0``: an unfitted
        model with the defaults, for its kernel).

        Fits are cached per ``c``; with ``warm_start_fits`` the fit at ``c``
        starts from the one at ``c - refit_every``, computed first if missing.
        """
        if c == 0:
            if 0 not in self._fits:
                with seeded(fit_seed(self.seed)), expected_fit_warnings():
                    self._fits[0] = self._kind.build(*self._model_data(self._tells))
            return self._fits[0]
        if c in self._fits:
            return self._fits[c]
        step, first = self.refit_every, c
        while self.warm_start_fits and first > step and first - step not in self._fits:
            first -= step  # a missing link of the chain: fitted first
        for count in range(first, c + 1, step):
            previous = None
            if self.warm_start_fits and count > step:
                previous = self._fits[count - step]
            with seeded(fit_seed(self.seed, count)), expected_fit_warnings():
                designs, comps = self._model_data(self._tells[:count])
                start = None if previous is None else previous.covar_module
                fitted = self._kind.build_for_fit(designs, comps, start)
                if previous is not None:
                    self._kind.warm_start(fitted, previous)
                self._fit(fitted)
            self._fits[count] = fitted
        return self._fits[c]

    def _fit(self, model: Any) -> None:
        with expected_fit_warnings(), torch.enable_grad(), limited(self.work_size):
            try:
                self._kind.fit(model, self.fit_options)
            except ModelFittingError:  # keep the starting hyperparameters
                self.failed_fits += 1
        model.eval()

    def best(self) -> tuple[Tensor, float, float]:
        r"""The told design with the highest posterior mean.

        Returns:
            ``(design, mean, sd)``: a ``d`` float64 tensor and the posterior
            mean and standard deviation of the utility there.
        """
        if not self._tells:
            raise InputDataError("best() needs at least one answer; none was told.")
        designs, _ = self.data()  # told, so checked at tell
        mean, sd = self._mean_sd(self.box.to_model(designs))  # n, n
        i = int(mean.argmax())
        return designs[i].clone(), float(mean[i]), float(sd[i])
