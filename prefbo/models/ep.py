r"""Pairwise probit preference GP with an expectation-propagation posterior.

The probit posterior is skewed: the Laplace approximation centres a Gaussian at
the mode and, when answers are decisive, keeps nearly the prior variance at the
compared designs (the likelihood is flat at the mode). EP matches the first two
moments of each answer's tilted distribution instead, so a confirmed "expected"
answer still shrinks the band, and the evidence is far closer to the exact one
(exact for a single answer). Same constructor, API and BoTorch integration as
:class:`~prefbo.models.PairwiseLaplaceGP`; fit with
:class:`~prefbo.mlls.PairwiseEPMLL`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.inference.ep import EPSites, EPState, check_ep_options, ep_evidence, run_ep
from prefbo.likelihoods.pairwise import PairwiseProbitLikelihood
from prefbo.models.pairwise import PairwisePreferenceGP
from prefbo.utils.checks import check_int, check_nonneg_float


class PairwiseEPGP(PairwisePreferenceGP):
    r"""Probit preference GP with a (parallel, damped) EP posterior.

    ``utility`` is the EP posterior mean at the designs.

    Example:
        >>> model = PairwiseEPGP(datapoints, comparisons)
        >>> fit_gpytorch_mll(PairwiseEPMLL(model.likelihood, model))
        >>> model.posterior(X).mean
    """

    _default_max_iter = 200

    def __init__(
        self,
        datapoints: Tensor | None,
        comparisons: Tensor | None,
        likelihood: Any = None,
        covar_module: Any = None,
        input_transform: Any = None,
        *,
        damping: float | None = None,
        fit_tol: float | None = None,
        anderson_memory: int = 5,
        **options: Any,
    ) -> None:
        r"""
        Args:
            datapoints: ``batch_shape x n x d`` designs (or ``None`` with
                ``comparisons=None`` for a prior-only model).
            comparisons: ``batch_shape x m x 2`` ``[winner, loser]`` indices.
            likelihood: ``None`` or a probit likelihood (prefbo's or BoTorch's).
            covar_module: A GPyTorch kernel; default BoTorch ``PairwiseGP``'s.
            input_transform: An input transform applied to designs.
            damping: EP damping; default adaptive (see
                :func:`prefbo.inference.run_ep`).
            fit_tol: Site tolerance while fitting hyperparameters (finite,
                ``≥ 0``); default ``1e-6`` (float64) / ``1e-4`` (float32). The
                EP evidence is stationary in the sites at the fixed point, so
                its error is second order in the site error; much tighter
                values can reach the rounding floor of the precision form on
                large problems and then run every sweep of ``max_iter``.
            anderson_memory: Sweeps remembered by the Anderson acceleration of
                the posterior's site updates (0: plain damped sweeps; see
                :func:`prefbo.inference.run_ep`). Hyperparameter fits always
                run plain sweeps, warm-started from the previous evaluation:
                their runs are short, and an accelerated run's end point moves
                discontinuously with the hyperparameters (at the tolerance's
                level), which makes L-BFGS-B's line search fail more often.
            **options: ``max_iter`` (EP sweeps, ``≥ 1``), ``tol`` (``≥ 0``) and
                the data options of
                :class:`~prefbo.models.pairwise.PairwisePreferenceGP`.

        Raises:
            InputTypeError: An EP option of the wrong type (``max_iter``/``maxfev``,
                ``tol``/``xtol``, ``damping``, ``anderson_memory``, ``fit_tol``).
            InputDataError: An EP option out of range (named as above).
            UnsupportedError: A likelihood other than the probit.
        """
        # validate the EP options up front; the aliases win as in the base class
        for names, check in (
            (("maxfev", "max_iter"), lambda name, value: check_int(name, value, 1)),
            (
                ("xtol", "tol"),
                lambda name, value: check_nonneg_float(name, value, allow_none=True),
            ),
        ):
            given = [k for k in names if options.get(k) is not None]
            if given:
                check(given[0], options[given[0]])
        check_ep_options(damping=damping, anderson_memory=anderson_memory)
        self._damping = damping
        self._fit_tol = check_nonneg_float("fit_tol", fit_tol, allow_none=True)
        self._anderson_memory = anderson_memory
        super().__init__(
            datapoints,
            comparisons,
            likelihood,
            covar_module,
            input_transform,
            **options,
        )
        if not isinstance(self.likelihood, PairwiseProbitLikelihood):
            raise UnsupportedError(
                "PairwiseEPGP needs a probit likelihood (EP's tilted moments are in "
                f"closed form for it); got {type(self.likelihood).__name__}."
            )

    def _ep_options(self) -> dict:
        return dict(
            self._options,
            damping=self._damping,
            anderson_memory=self._anderson_memory,
        )

    def warm_start(self, previous: PairwiseEPGP | EPSites | EPState) -> None:
        r"""Start the next EP run (fit or posterior) from the sites of
        ``previous``.

        Useful when answers were appended: the sites of a model of the first
        ``m₀`` answers start those rows, the new rows start at zero, and EP
        converges in a few sweeps instead of tens. Sites whose comparisons
        are not the first rows of this model's are ignored (a cold start);
        the fixed point is the same either way.

        Args:
            previous: A :class:`PairwiseEPGP` of the first ``m₀`` answers (its
                :attr:`last_sites`; nothing changes if it has run no EP yet),
                or the sites themselves:
                :class:`~prefbo.inference.ep.EPSites` or an
                :class:`~prefbo.inference.ep.EPState`.
        """
        if isinstance(previous, PairwiseEPGP):
            previous = previous.last_sites
            if previous is None:
                return
        if not isinstance(previous, (EPSites, EPState)):
            raise InputDataError(
                "previous must be a PairwiseEPGP, EPSites or EPState; got "
                f"{type(previous).__name__}."
            )
        self._warm = previous

    @property
    def last_sites(self) -> EPSites | None:
        r"""The sites of the latest EP run (a fit's evidence or the posterior),
        ``None`` before any; computes nothing."""
        warm = self._warm
        if isinstance(warm, EPState) and warm.site_nu is not None:
            return warm.sites()
        return warm if isinstance(warm, EPSites) else None

    def _conditioned_start(self, init: Tensor) -> Any:
        # the new comparisons are appended: the current sites start the rest
        sites = self.last_sites
        return init if sites is None else sites

    def _compute_state(self, chol_prior: Tensor) -> EPState:
        return run_ep(
            chol_prior,
            self.comparisons,
            self.likelihood,
            self.last_sites,
            form="whitened",
            **self._ep_options(),
        )

    def _compute_evidence(self, K: Tensor) -> tuple[Tensor, EPState]:
        options = self._ep_options()
        options["tol"] = (
            self._fit_tol
            if self._fit_tol is not None
            else (1e-6 if K.dtype == torch.float64 else 1e-4)
        )
        # plain sweeps: where an accelerated run stops moves discontinuously
        # with the hyperparameters (at the tolerance's level), and L-BFGS-B's
        # line search then fails more often (BoTorch retries and gives up)
        options["anderson_memory"] = 0
        return ep_evidence(
            K, self.comparisons, self.likelihood, self.last_sites, **options
        )

    @property
    def ep_state(self) -> EPState:
        r"""The :class:`~prefbo.inference.ep.EPState` (sites and moments)."""
        return self._get_state()
