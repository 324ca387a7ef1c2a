r"""Pairwise preference GP with a batched Laplace approximation.

A drop-in replacement for ``botorch.models.PairwiseGP`` (Chu & Ghahramani
2005): same constructor, comparison convention (``batch_shape x m x 2`` long,
rows ``[winner, loser]``), default kernel and priors and outputs. Differences:

- the mode is found by batched, damped Newton in torch
  (:mod:`prefbo.inference.laplace`), with no scipy and no host copies, so it
  runs on CUDA and over batch dimensions without a loop;
- the probit derivatives are exact for every ``z`` (BoTorch clamps ``z`` to
  ``[-3, 3]``, which biases the mode when answers are decisive);
- the factorisation at the mode is cached and reused by every ``posterior``
  call until the data or a hyperparameter changes (detected automatically);
- the evidence gradient is analytic, including the mode's dependence on the
  hyperparameters (see :class:`prefbo.mlls.PairwiseLaplaceMLL`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError
from prefbo.inference.evidence import laplace_evidence
from prefbo.inference.gaussian import GaussianApproximation
from prefbo.inference.laplace import FORMS, find_mode
from prefbo.models.pairwise import PairwisePreferenceGP
from prefbo.utils.checks import check_nonneg_float


class PairwiseLaplaceGP(PairwisePreferenceGP):
    r"""Probit (or logit) preference GP with a batched Laplace posterior.

    Example:
        >>> datapoints = torch.rand(10, 2, dtype=torch.float64)
        >>> comparisons = torch.tensor([[0, 1], [2, 1], [3, 0]])
        >>> model = PairwiseLaplaceGP(datapoints, comparisons)
        >>> mll = PairwiseLaplaceMLL(model.likelihood, model)
        >>> fit_gpytorch_mll(mll)
        >>> posterior = model.posterior(torch.rand(4, 2, dtype=torch.float64))
    """

    def __init__(
        self,
        datapoints: Tensor | None,
        comparisons: Tensor | None,
        likelihood: Any = None,
        covar_module: Any = None,
        input_transform: Any = None,
        *,
        fit_form: str = "auto",
        fit_tol: float | None = None,
        **options: Any,
    ) -> None:
        r"""
        Args:
            datapoints: ``batch_shape x n x d`` designs, or ``None`` (with
                ``comparisons=None``) for a prior-only model.
            comparisons: ``batch_shape x m x 2`` indices into ``datapoints``;
                row ``[w, l]`` means design ``w`` was preferred to design ``l``.
                Repeated rows each count.
            likelihood: ``None`` (probit, σ = 1), a prefbo
                :class:`~prefbo.likelihoods.PairwiseLikelihood`, or BoTorch's
                ``PairwiseProbitLikelihood`` / ``PairwiseLogitLikelihood``.
            covar_module: A GPyTorch kernel; default BoTorch ``PairwiseGP``'s.
            input_transform: An input transform applied to designs.
            fit_form: Newton form used while fitting hyperparameters (training
                mode): ``"auto"`` (the cheap precision form ``K⁻¹ + W`` in
                float64 when ``K`` is not near-singular, else whitened),
                ``"whitened"`` or ``"precision"``; see
                :func:`prefbo.inference.find_mode`. Predictions always use the
                state found in the stable whitened form ``I + Lᵀ W L``.
            fit_tol: Newton step tolerance while fitting (training mode);
                default ``1e-6`` (float64) / ``1e-4`` (float32). The
                evidence, its log-determinant included, is evaluated at the
                returned mode: its error is first order in that mode's
                distance to the exact one (through the log-determinant; the
                rest is stationary there), far below the optimiser's
                tolerance; predictions use ``tol``.
            **options: ``max_iter``, ``tol`` (Newton; BoTorch names ``maxfev``,
                ``xtol``), ``consolidate_rtol``, ``consolidate_atol``,
                ``jitter``, ``nugget``: see
                :class:`~prefbo.models.pairwise.PairwisePreferenceGP`.
        """
        if fit_form not in FORMS:
            raise InputDataError(f"fit_form must be one of {FORMS}; got {fit_form!r}.")
        self._fit_form = fit_form
        self._fit_tol = check_nonneg_float("fit_tol", fit_tol, allow_none=True)
        super().__init__(
            datapoints,
            comparisons,
            likelihood,
            covar_module,
            input_transform,
            **options,
        )

    def _compute_state(self, chol_prior: Tensor) -> GaussianApproximation:
        return find_mode(
            chol_prior,
            self.comparisons,
            self.likelihood,
            self._warm,
            form="whitened",
            **self._options,
        )

    def _compute_evidence(self, K: Tensor) -> tuple[Tensor, GaussianApproximation]:
        options = dict(self._options, form=self._fit_form)
        if self._fit_tol is not None:
            options["tol"] = self._fit_tol
        else:
            options["tol"] = 1e-6 if K.dtype == torch.float64 else 1e-4
        evidence, state = laplace_evidence(
            K, self.comparisons, self.likelihood, self._warm, **options
        )
        if self.comparison_mask is not None:
            # a padding row [0, 0] adds the constant log p(Δ = 0); take it out
            pad = (~self.comparison_mask).sum(-1).to(evidence)
            zero = torch.zeros((), dtype=evidence.dtype, device=evidence.device)
            evidence = evidence - pad * self.likelihood._log_prob(zero)
        return evidence, state

    def warm_start(
        self, previous: PairwiseLaplaceGP | Tensor | GaussianApproximation
    ) -> None:
        r"""Start the next Newton search (a fit's evidence or the posterior)
        at the mode of ``previous``.

        Useful when designs were appended: the mode of a model of the first
        ``n₀`` designs starts those, the designs added since start at zero.
        Only the start changes: Newton keeps it only where it beats
        ``f = 0``, and finds the same mode to its tolerance.

        Args:
            previous: A :class:`PairwiseLaplaceGP` of the first ``n₀``
                designs (its :attr:`last_mode`; nothing changes if it has
                computed no mode yet), or the mode itself: ``batch_shape x
                n₀`` utilities (``n₀ ≤ n``, the number of designs) or a
                :class:`~prefbo.inference.GaussianApproximation`.
        """
        mode = previous
        if isinstance(previous, PairwiseLaplaceGP):
            mode = previous.last_mode
            if mode is None:
                return
        if isinstance(mode, GaussianApproximation):
            mode = mode.mode
        if not isinstance(mode, Tensor) or mode.ndim < 1:
            raise InputDataError(
                "previous must be a PairwiseLaplaceGP, a batch_shape x n0 tensor "
                f"(its mode) or a GaussianApproximation; got {type(mode).__name__}."
            )
        if self._has_no_data():
            raise InputDataError("warm_start needs training data; this model has none.")
        batch, n = self.datapoints.shape[:-2], self.datapoints.shape[-2]
        n0 = mode.shape[-1]
        if n0 > n:
            raise InputDataError(
                f"mode must have at most n={n} entries (one per design); got {n0}."
            )
        try:
            mode = mode.detach().to(self.datapoints).expand(batch + (n0,))
        except RuntimeError:
            raise InputDataError(
                f"mode must have the model's batch_shape {tuple(batch)}; got shape "
                f"{tuple(mode.shape)}."
            ) from None
        self._warm = torch.cat([mode, mode.new_zeros(batch + (n - n0,))], dim=-1)

    @property
    def last_mode(self) -> Tensor | None:
        r"""The mode of the latest Newton search (a fit's evidence or the
        posterior; the :meth:`warm_start` given if none ran since), ``None``
        before any; computes nothing."""
        warm = self._warm
        if isinstance(warm, GaussianApproximation):
            return warm.mode
        return warm if isinstance(warm, Tensor) else None

    @property
    def laplace_state(self) -> GaussianApproximation:
        r"""The :class:`~prefbo.inference.GaussianApproximation` at the mode."""
        return self._get_state()
