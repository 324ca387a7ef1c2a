r"""Base class of pairwise preference GPs with a Gaussian posterior approximation.

:class:`PairwisePreferenceGP` holds everything that does not depend on how the
posterior is approximated: the training data and their consolidation, the
default kernel, the cache of the approximation (refreshed when data or a
hyperparameter changes), the training-mode output with the evidence and the
BoTorch ``Model`` interface. Every approximation here is a Gaussian whose
precision at the designs is ``K⁻¹ + Dᵀ diag(ω) D`` (Laplace: the likelihood
curvature at the mode; EP: the site precisions), so they share
:class:`~prefbo.inference.GaussianApproximation` for prediction. Subclasses
implement :meth:`PairwisePreferenceGP._compute_state` and
:meth:`PairwisePreferenceGP._compute_evidence`.

Its jobs live in their own modules: the training data (setting, checks,
consolidation) and the training covariance in
:mod:`prefbo.models.training_data`, the cache key in
:mod:`prefbo.models.state_key`, predictions in :mod:`prefbo.models.prediction`,
conditioning and fantasies in :mod:`prefbo.models.conditioning`, the returned
distributions in :mod:`prefbo.posteriors.gaussian`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch
from botorch.acquisition.objective import PosteriorTransform
from botorch.models.model import Model
from botorch.models.transforms.input import InputTransform
from botorch.posteriors.gpytorch import GPyTorchPosterior
from botorch.posteriors.posterior import Posterior
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.models import GP
from torch import Tensor

from prefbo.data.validation import validate_datapoints
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.inference.cholesky import jittered_cholesky
from prefbo.inference.gaussian import GaussianApproximation
from prefbo.kernels.defaults import default_preference_covar_module
from prefbo.kernels.fused import prior_gram
from prefbo.likelihoods.pairwise import PairwiseLikelihood, as_prefbo_likelihood
from prefbo.mlls.scipy_log import custom_fit
from prefbo.models.conditioning import PairwiseConditioningMixin
from prefbo.models.prediction import (
    DerivedPredictionsMixin,
    check_test_points,
    predictive_mvn,
    with_observation_noise,
)
from prefbo.models.state_key import state_key
from prefbo.models.training_data import (
    PairwiseTrainingData,
    padded_train_covariance,
    warn_outside_unit_cube,
)
from prefbo.posteriors.gaussian import TrainingPosterior, mvn
from prefbo.utils.checks import check_int, check_nonneg_float


class PairwisePreferenceGP(
    PairwiseTrainingData,
    DerivedPredictionsMixin,
    PairwiseConditioningMixin,
    Model,
    GP,
    ABC,
):
    r"""Pairwise preference GP with a Gaussian approximation of the posterior.

    Abstract: see :class:`~prefbo.models.PairwiseLaplaceGP` and
    :class:`~prefbo.models.PairwiseEPGP`.
    """

    _num_outputs = 1
    _default_max_iter = 100

    def __init__(
        self,
        datapoints: Tensor | None,
        comparisons: Tensor | None,
        likelihood: Any = None,
        covar_module: Kernel | None = None,
        input_transform: InputTransform | None = None,
        *,
        max_iter: int | None = None,
        tol: float | None = None,
        consolidate_rtol: float = 0.0,
        consolidate_atol: float = 1e-10,
        xtol: float | None = None,
        maxfev: int | None = None,
        jitter: float | None = None,
        nugget: float | None = None,
        design_mask: Tensor | None = None,
        comparison_mask: Tensor | None = None,
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
            covar_module: A GPyTorch kernel; default
                :func:`~prefbo.kernels.default_preference_covar_module`
                (BoTorch ``PairwiseGP``'s). Any kernel works (no ScaleKernel
                requirement).
            input_transform: An input transform applied to designs. The
                default kernel's priors assume designs in the unit cube:
                for other designs pass
                ``botorch.models.transforms.input.Normalize(d, bounds=...)``
                (without it and with the default kernel, designs outside
                ``[0, 1]^d`` give an ``InputDataWarning``, as BoTorch's
                models do).
            max_iter: Iteration budget of the approximation (Newton steps,
                default 100, or EP sweeps, default 200; BoTorch name:
                ``maxfev``).
            tol: Its tolerance (BoTorch name: ``xtol``); default ``1e-9``
                (float64) or ``1e-4`` (float32).
            consolidate_rtol: Designs equal within ``rtol``/``atol`` (unbatched
                data only) are merged into one design, as BoTorch does; the
                default merges (numerically) identical designs only, atol=1e-10
                (BoTorch: ``atol=1e-4``).
            consolidate_atol: See ``consolidate_rtol``.
            xtol: Alias of ``tol`` for BoTorch compatibility.
            maxfev: Alias of ``max_iter`` for BoTorch compatibility.
            jitter: First relative jitter tried when ``K`` is not numerically
                positive definite (a warning says when it is used).
            nugget: Relative diagonal term always added to the training
                covariance, ``K + nugget · mean(diag K) · I``; default ``1e-8``
                (float64) / ``1e-6`` (float32). It keeps ``K`` factorisable when
                designs nearly repeat (routine in a PBO loop) without changing
                predictions measurably; escalating jitter with a
                ``NumericalWarning`` remains the fallback beyond it.
            design_mask: Optional ``batch_shape x n`` bool, False for padding
                designs of ragged per-user data (see
                :func:`~prefbo.models.batch_users`): they get an independent
                prior and no influence on predictions.
            comparison_mask: Optional ``batch_shape x m`` bool, False for
                padding comparisons (ignored whatever their indices).
        """
        super().__init__()
        if (datapoints is None) != (comparisons is None):
            raise InputDataError(
                "datapoints and comparisons must both be tensors, or both None for a "
                f"prior-only model; got datapoints={type(datapoints).__name__}, "
                f"comparisons={type(comparisons).__name__}."
            )
        self.likelihood: PairwiseLikelihood = as_prefbo_likelihood(likelihood)
        budget_name = "maxfev" if maxfev is not None else "max_iter"
        budget = maxfev if maxfev is not None else max_iter
        tol_name = "xtol" if xtol is not None else "tol"
        self._options = {
            "max_iter": self._default_max_iter
            if budget is None
            else check_int(budget_name, budget, 1),
            "tol": check_nonneg_float(
                tol_name, xtol if xtol is not None else tol, allow_none=True
            ),
        }
        self._jitter = check_nonneg_float("jitter", jitter, allow_none=True)
        self._nugget = check_nonneg_float("nugget", nugget, allow_none=True)
        self._consolidate = (
            check_nonneg_float("consolidate_rtol", consolidate_rtol),
            check_nonneg_float("consolidate_atol", consolidate_atol),
        )
        self.register_buffer("datapoints", None, persistent=False)
        self.register_buffer("comparisons", None, persistent=False)
        self.register_buffer("design_mask", None, persistent=False)
        self.register_buffer("comparison_mask", None, persistent=False)
        self._state: GaussianApproximation | None = None
        self._state_key: tuple | None = None
        self._warm: Any = None  # a mode, GaussianApproximation/EPState or EPSites
        self.unconsolidated_datapoints: Tensor | None = None
        self.unconsolidated_comparisons: Tensor | None = None
        self.consolidated_indices: Tensor | None = None
        if datapoints is not None:
            datapoints = validate_datapoints(datapoints)
            dim, batch_shape = datapoints.shape[-1], datapoints.shape[:-2]
            dtype = datapoints.dtype
        else:
            dim, batch_shape, dtype = None, torch.Size(), torch.float64
        if input_transform is not None:
            if datapoints is not None:
                input_transform.to(datapoints)
            self.input_transform = input_transform
        default_kernel = covar_module is None
        if covar_module is None:
            if dim is None:
                raise InputDataError(
                    "A prior-only model (datapoints=None) needs an explicit "
                    "covar_module, since the input dimension is unknown."
                )
            if input_transform is not None and datapoints is not None:
                with torch.no_grad():
                    dim = input_transform.preprocess_transform(datapoints).shape[-1]
            covar_module = default_preference_covar_module(
                dim=dim, batch_shape=batch_shape, dtype=dtype
            )
        if not isinstance(covar_module, Kernel):
            raise InputTypeError(
                "covar_module must be a gpytorch Kernel; got "
                f"{type(covar_module).__name__}."
            )
        self.covar_module = covar_module
        if datapoints is not None:
            self.to(dtype=datapoints.dtype, device=datapoints.device)
            self.set_train_data(
                datapoints,
                comparisons,
                update_model=False,
                design_mask=design_mask,
                comparison_mask=comparison_mask,
            )
            if default_kernel and input_transform is None:
                warn_outside_unit_cube(self.unconsolidated_datapoints, self.design_mask)

    @property
    def num_outputs(self) -> int:
        r"""One latent utility."""
        return self._num_outputs

    def custom_fit(self, mll: Any, **kwargs: Any) -> Any:
        r"""What ``botorch.fit.fit_gpytorch_mll(mll, ...)`` runs for this model.

        BoTorch's fallback (retries from prior samples, rollback, warning
        policy) with L-BFGS-B in log coordinates for the parameters bounded
        below only (the raw lengthscales), see
        :func:`prefbo.mlls.fit_mll_scipy`, and box-prior hyperparameters (the
        outputscale) bounded to their box, see
        :func:`prefbo.mlls.box_prior_bounds`. An ``optimizer=`` given to
        ``fit_gpytorch_mll`` is used instead of both; the other arguments go
        through unchanged.
        """
        return custom_fit(mll, **kwargs)

    # ------------------------------------------------------ input transforms
    def _set_transformed_inputs(self) -> None:
        # Designs are stored raw and transformed on the fly.
        return

    def _revert_to_original_inputs(self) -> None:
        return

    def _train_inputs(self) -> Tensor:
        r"""Transformed designs: ``batch_shape x n x d``."""
        if not hasattr(self, "input_transform"):
            return self.datapoints
        if self.training:
            return self.transform_inputs(self.datapoints)
        return self.input_transform.preprocess_transform(self.datapoints)

    # ---------------------------------------------------------------- state
    def _cache_key(self) -> tuple:
        r"""What the approximation depends on (see
        :func:`~prefbo.models.state_key.state_key`)."""
        mods = [self.covar_module]
        if hasattr(self, "input_transform"):
            mods.append(self.input_transform)
        return state_key(mods, self.datapoints, self.comparisons, self.likelihood)

    def _prior_covariance(self, X: Tensor) -> Tensor:
        # evaluated at once (the lazy kernel tensor only adds overhead here),
        # BoTorch's default kernel with its closed-form backward
        return prior_gram(self.covar_module, X)

    def _train_covariance(self, X: Tensor) -> Tensor:
        r"""``K + nugget · mean(diag K) · I`` at the training designs."""
        K = self._prior_covariance(X)
        return padded_train_covariance(K, self.design_mask, self._nugget)

    @abstractmethod
    def _compute_state(self, chol_prior: Tensor) -> GaussianApproximation:
        r"""The approximation at the designs for predictions (no autograd).

        Args:
            chol_prior: ``batch_shape x n x n`` lower factor of the training
                covariance.

        Returns:
            The state (warm-started from ``self._warm`` where useful).
        """

    @abstractmethod
    def _compute_evidence(self, K: Tensor) -> tuple[Tensor, GaussianApproximation]:
        r"""The approximate log evidence, differentiable in ``K``, and the state.

        Args:
            K: ``batch_shape x n x n`` training covariance (requires grad).

        Returns:
            ``(evidence, state)``, the evidence of shape ``batch_shape``.
        """

    def _get_state(self) -> GaussianApproximation:
        r"""The approximation at the current data and hyperparameters (cached)."""
        if self._has_no_data():
            raise UnsupportedError("This prior-only model has no training data.")
        key = self._cache_key()
        if self._state is not None and self._state_key == key:
            return self._state
        with torch.no_grad():
            K = self._train_covariance(self._train_inputs())
            L = jittered_cholesky(K, name="prior covariance K", jitter=self._jitter)
            state = self._compute_state(L)
        self._store_state(state, key)
        return state

    def _store_state(self, state: GaussianApproximation, key: tuple) -> None:
        self._state, self._state_key = state, key
        self._warm = state

    @property
    def utility(self) -> Tensor:
        r"""``batch_shape x n`` posterior location of the utilities at the designs
        (the Laplace mode, or the EP mean)."""
        return self._get_state().mode

    @property
    def approximation(self) -> GaussianApproximation:
        r"""The Gaussian approximation at the designs
        (:class:`~prefbo.inference.GaussianApproximation`)."""
        return self._get_state()

    # -------------------------------------------------------------- forward
    def forward(self, datapoints: Tensor) -> MultivariateNormal:
        r"""Training: the approximate posterior at the designs with its evidence
        (a :class:`~prefbo.posteriors.gaussian.TrainingPosterior`, read by
        :class:`~prefbo.mlls.PairwiseLaplaceMLL`). Evaluation: the predictive
        posterior (prior if there is no data).

        Args:
            datapoints: Training mode: the training designs
                (``model.train_inputs[0]``). Evaluation: ``batch_shape x q x d``
                transformed test points.

        Returns:
            A :class:`~prefbo.posteriors.gaussian.TrainingPosterior` (training)
            or a ``MultivariateNormal`` (evaluation).
        """
        if not self.training:
            return self._predict(datapoints)
        if self._has_no_data():
            raise UnsupportedError(
                "A prior-only model cannot be trained; call set_train_data first."
            )
        if datapoints is not self.unconsolidated_datapoints and not (
            datapoints.shape == self.unconsolidated_datapoints.shape
            and torch.equal(datapoints, self.unconsolidated_datapoints)
        ):
            raise InputDataError(
                "In training mode the model must be called on its training designs "
                "(model.train_inputs[0]); got other inputs of shape "
                f"{tuple(datapoints.shape)}."
            )
        K = self._train_covariance(self._train_inputs())
        evidence, state = self._compute_evidence(K)
        # the predictive state is recomputed on first use; the next fit step
        # warm-starts from this one, unless it failed (a fit backs off from it)
        if bool(torch.isfinite(evidence.detach()).all()):
            self._warm = state
        return TrainingPosterior(
            state.mode, state.posterior_covariance(), evidence=evidence
        )

    def _predict(self, X: Tensor) -> MultivariateNormal:
        r"""Joint predictive distribution at transformed ``batch_shape x q x d``."""
        if self._has_no_data():
            mean = torch.zeros(X.shape[:-1], dtype=X.dtype, device=X.device)
            return mvn(mean, self._prior_covariance(X))
        return predictive_mvn(
            self._get_state(),
            self.covar_module,
            X,
            self._train_inputs(),
            self.design_mask,
        )

    # ------------------------------------------------------------ posterior
    def _validate_X(self, X: Tensor, name: str = "X") -> Tensor:
        if self._has_no_data():
            return check_test_points(X, name, None, None)
        return check_test_points(X, name, self.dim, self.datapoints.dtype)

    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: PosteriorTransform | None = None,
        **kwargs: Any,
    ) -> Posterior:
        r"""Joint posterior of the utility at ``X``.

        Args:
            X: A ``batch_shape x q x d`` tensor.
            output_indices: Must be ``None`` (one output).
            observation_noise: If True, add the utility noise ``σ²`` of the
                likelihood to the diagonal (the "noisy utility" that an answer
                compares); a tensor is added as given.
            posterior_transform: An optional ``PosteriorTransform``.

        Returns:
            A ``GPyTorchPosterior`` with ``batch_shape' x q x 1`` mean and the
            full ``q x q`` joint covariance.
        """
        if output_indices is not None and list(output_indices) != [0]:
            raise UnsupportedError(
                f"output_indices must be None or [0] for a one-output model; got "
                f"{output_indices}."
            )
        self.eval()
        X = self._validate_X(X)
        dist = self._predict(self.transform_inputs(X))
        if observation_noise is not False:
            dist = with_observation_noise(
                dist, observation_noise, self.likelihood.noise_std
            )
        posterior = GPyTorchPosterior(dist)
        if posterior_transform is not None:
            return posterior_transform(posterior)
        return posterior

    def warm_start(self, previous: PairwisePreferenceGP) -> None:
        r"""Start the next approximation (a fit's evidence or the posterior)
        where ``previous`` left its own.

        Useful when answers were appended: ``previous`` is a model of the
        same class on the first designs and answers of this one (a prefix,
        as in a preference loop), whose latest Newton search or EP run starts
        those, the rest starting at zero. Only the start changes: the
        approximation reached is the same to its tolerance. A ``previous``
        that has computed nothing yet leaves the start unchanged.

        Args:
            previous: A model of the same class fitted on a prefix of this
                model's data.

        Raises:
            UnsupportedError: The class has no warm start.
        """
        raise UnsupportedError(f"{type(self).__name__} has no warm start.")
