r"""Base class of pairwise preference GPs with a Gaussian posterior approximation.

:class:`PairwisePreferenceGP` holds everything that does not depend on how the
posterior is approximated: data validation and consolidation, the default
kernel, the cache of the approximation (refreshed when data or a hyperparameter
changes), joint predictions for many q-batches in one triangular solve,
``predict_preference``, the centred posterior, ``condition_on_observations``
and the BoTorch ``Model`` interface. Every approximation here is a Gaussian
whose precision at the designs is ``K⁻¹ + Dᵀ diag(ω) D`` (Laplace: the
likelihood curvature at the mode; EP: the site precisions), so they share
:class:`~prefbo.inference.GaussianApproximation` for prediction. Subclasses implement
:meth:`PairwisePreferenceGP._compute_state` and
:meth:`PairwisePreferenceGP._compute_evidence`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from copy import deepcopy
from itertools import chain
from typing import Any

import torch
from botorch.acquisition.objective import PosteriorTransform
from botorch.models.model import Model
from botorch.models.transforms.input import InputTransform
from botorch.models.utils.assorted import consolidate_duplicates
from botorch.posteriors.gpytorch import GPyTorchPosterior
from botorch.posteriors.posterior import Posterior
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.models import GP
from linear_operator import to_linear_operator
from torch import Tensor

from prefbo.data.validation import (
    check_int,
    check_nonneg_float,
    validate_comparisons,
    validate_datapoints,
    validate_pairwise_data,
)
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.inference.cholesky import jittered_cholesky
from prefbo.inference.laplace import GaussianApproximation
from prefbo.kernels.defaults import default_preference_covar_module
from prefbo.kernels.fused import prior_gram
from prefbo.likelihoods.pairwise import PairwiseLikelihood, as_prefbo_likelihood


def _check_mask(
    data: Tensor, mask: object, name: str, shape: torch.Size
) -> tuple[Tensor, Tensor]:
    r"""Validate a padding mask against ``data``'s leading shape."""
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise InputDataError(
            f"{name} must be a bool tensor; got {type(mask).__name__}"
            + (f" of dtype {mask.dtype}." if isinstance(mask, Tensor) else ".")
        )
    try:
        torch.broadcast_shapes(mask.shape, shape)
    except RuntimeError:
        raise InputDataError(
            f"{name} must have shape {tuple(shape)} (batch_shape x rows); got "
            f"{tuple(mask.shape)}."
        ) from None
    return data, mask.to(data.device)


def _mvn(mean: Tensor, covariance: Tensor) -> MultivariateNormal:
    r"""A GPyTorch MVN with a lazily factorised (possibly singular) covariance."""
    return MultivariateNormal(mean, to_linear_operator(covariance))


class _Snapshot:
    r"""A value snapshot of a small tensor that compares equal to an identical one."""

    __slots__ = ("value",)

    def __init__(self, t: Tensor) -> None:
        self.value = t.detach().clone()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Snapshot)
            and self.value.shape == other.value.shape
            and self.value.dtype == other.value.dtype
            and self.value.device == other.value.device
            and bool(torch.equal(self.value, other.value))
        )

    __hash__ = None


class PairwisePreferenceGP(Model, GP, ABC):
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
            input_transform: An input transform applied to designs.
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
            "tol": check_nonneg_float(tol_name, xtol if xtol is not None else tol),
        }
        self._jitter = check_nonneg_float("jitter", jitter)
        self._nugget = check_nonneg_float("nugget", nugget)
        self._consolidate = (
            check_nonneg_float("consolidate_rtol", consolidate_rtol, allow_none=False),
            check_nonneg_float("consolidate_atol", consolidate_atol, allow_none=False),
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

    # ------------------------------------------------------------------ data
    def set_train_data(
        self,
        datapoints: Tensor | None = None,
        comparisons: Tensor | None = None,
        strict: bool = False,
        update_model: bool = True,
        design_mask: Tensor | None = None,
        comparison_mask: Tensor | None = None,
    ) -> None:
        r"""Replace the training data.

        Args:
            datapoints: ``batch_shape x n x d`` designs.
            comparisons: ``batch_shape x m x 2`` ``[winner, loser]`` indices.
            strict: If True, the new data must keep the old shapes, dtype and
                device.
            update_model: If True, find the new mode now (else on first use).
            design_mask: Optional ``batch_shape x n`` bool (False: padding).
            comparison_mask: Optional ``batch_shape x m`` bool (False: padding).
        """
        if datapoints is None and comparisons is None:
            return
        if comparison_mask is not None and isinstance(comparisons, Tensor):
            comparisons, comparison_mask = _check_mask(
                comparisons, comparison_mask, "comparison_mask", comparisons.shape[:-1]
            )
            # padding rows become [0, 1] for validation, [0, 0] afterwards
            pad = torch.tensor(
                [0, 1], dtype=comparisons.dtype, device=comparisons.device
            )
            comparisons = torch.where(comparison_mask.unsqueeze(-1), comparisons, pad)
        datapoints, comparisons = validate_pairwise_data(datapoints, comparisons)
        if comparison_mask is not None:
            comparison_mask = comparison_mask.expand(comparisons.shape[:-1])
            comparisons = torch.where(
                comparison_mask.unsqueeze(-1),
                comparisons,
                torch.zeros_like(comparisons),
            )
        if design_mask is not None:
            datapoints, design_mask = _check_mask(
                datapoints, design_mask, "design_mask", datapoints.shape[:-1]
            )
            design_mask = design_mask.expand(datapoints.shape[:-1])
            empty = ~design_mask.any(-1)
            if bool(empty.any()):
                where = (
                    f"of batch element(s) {empty.nonzero().tolist()} "
                    if empty.ndim
                    else ""
                )
                raise InputDataError(
                    f"design_mask marks every design {where}as padding; a model "
                    "needs at least one real design."
                )
            # designs used by real comparisons (padding rows [0, 0] excluded)
            dev = comparisons.device
            if comparison_mask is None:
                real = torch.ones(comparisons.shape[:-1], dtype=torch.long, device=dev)
            else:
                real = comparison_mask.to(torch.long)
            used = torch.zeros(design_mask.shape, dtype=torch.long, device=dev)
            used.scatter_add_(-1, comparisons[..., 0], real)
            used.scatter_add_(-1, comparisons[..., 1], real)
            if bool(((used > 0) & ~design_mask).any()):
                raise InputDataError(
                    "comparisons refer to designs that design_mask marks as padding; "
                    "mark those comparisons False in comparison_mask (or the "
                    "designs True in design_mask)."
                )
        if strict and self.unconsolidated_datapoints is not None:
            for name, new, old in (
                ("datapoints", datapoints, self.unconsolidated_datapoints),
                ("comparisons", comparisons, self.unconsolidated_comparisons),
            ):
                for attr in ("shape", "dtype", "device"):
                    if getattr(new, attr) != getattr(old, attr):
                        raise InputDataError(
                            f"strict=True: cannot change the {attr} of {name} "
                            f"(expected {getattr(old, attr)}, got "
                            f"{getattr(new, attr)})."
                        )
        self.unconsolidated_datapoints = datapoints
        self.unconsolidated_comparisons = comparisons
        rtol, atol = self._consolidate
        self.design_mask = design_mask
        self.comparison_mask = comparison_mask
        if datapoints.ndim == 2 and design_mask is None and comparison_mask is None:
            dp, cp, idx = consolidate_duplicates(
                datapoints, comparisons, rtol=rtol, atol=atol
            )
        else:
            dp, cp, idx = datapoints, comparisons, None
        warm = self._warm
        if isinstance(warm, GaussianApproximation):
            warm = warm.mode
        if isinstance(warm, Tensor) and warm.shape != dp.shape[:-1]:
            self._warm = None  # (EP sites are checked against the comparisons)
        self.datapoints = dp
        self.comparisons = cp
        self.consolidated_indices = idx
        self._state = None
        self._state_key = None
        self._learn_input_transform()
        if update_model:
            self._get_state()

    def _learn_input_transform(self) -> None:
        r"""Show the training designs to the input transform in train mode, as
        BoTorch's ``PairwiseGP`` does when its data are set, so that learned
        statistics (``Normalize``'s bounds) come from these designs before any
        fit; without it the transform stayed at its initial identity bounds
        until a training-mode forward."""
        transform = getattr(self, "input_transform", None)
        if transform is None:
            return
        was_training = transform.training
        transform.train()
        try:
            with torch.no_grad():
                transform(self.datapoints)
        finally:
            transform.train(was_training)

    def _has_no_data(self) -> bool:
        return self.datapoints is None

    @property
    def train_inputs(self) -> tuple[Tensor, ...]:
        r"""``(datapoints,)`` (unconsolidated), for BoTorch's fitting closures."""
        return () if self._has_no_data() else (self.unconsolidated_datapoints,)

    @property
    def train_targets(self) -> Tensor | None:
        r"""The (unconsolidated) comparisons, for BoTorch's fitting closures."""
        return self.unconsolidated_comparisons

    @property
    def n(self) -> int:
        r"""Number of (consolidated) designs."""
        return self.datapoints.shape[-2]

    @property
    def m(self) -> int:
        r"""Number of comparisons."""
        return self.comparisons.shape[-2]

    @property
    def dim(self) -> int:
        r"""Number of input features."""
        return self.datapoints.shape[-1]

    @property
    def num_outputs(self) -> int:
        r"""One latent utility."""
        return self._num_outputs

    @property
    def batch_shape(self) -> torch.Size:
        r"""Batch shape of the model (of the data, e.g. one element per user)."""
        if self._has_no_data():
            return torch.Size()
        return self.datapoints.shape[:-2]

    def custom_fit(self, mll: Any, **kwargs: Any) -> Any:
        r"""What ``botorch.fit.fit_gpytorch_mll(mll, ...)`` runs for this model.

        BoTorch's fallback (retries from prior samples, rollback, warning
        policy) with L-BFGS-B in log coordinates for the parameters bounded
        below only (the raw lengthscales), see
        :func:`prefbo.fit.fit_mll_scipy`, and box-prior hyperparameters (the
        outputscale) bounded to their box, see
        :func:`prefbo.fit.box_prior_bounds`. An ``optimizer=`` given to
        ``fit_gpytorch_mll`` is used instead of both; the other arguments go
        through unchanged.
        """
        from prefbo.fit.scipy_log import custom_fit

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
        r"""What the Laplace state depends on: hyperparameter values, data, likelihood.

        Hyperparameters are compared by value (small tensors are snapshotted),
        since GPyTorch's setters write through ``.data`` without bumping the
        tensors' version counters.
        """
        mods = [self.covar_module]
        if hasattr(self, "input_transform"):
            mods.append(self.input_transform)
        tensors = chain.from_iterable(chain(m.parameters(), m.buffers()) for m in mods)
        key: list = []
        for t in tensors:
            if t.numel() <= 4096:
                key.append(_Snapshot(t))
            else:
                key.append((id(t), t._version, t.data_ptr()))
        key += [
            (id(self.datapoints), self.datapoints._version),
            (id(self.comparisons), self.comparisons._version),
            type(self.likelihood),
            self.likelihood.noise_std,
        ]
        return tuple(key)

    def _prior_covariance(self, X: Tensor) -> Tensor:
        # evaluated at once (the lazy kernel tensor only adds overhead here),
        # BoTorch's default kernel with its closed-form backward
        return prior_gram(self.covar_module, X)

    def _train_covariance(self, X: Tensor) -> Tensor:
        r"""``K + nugget · mean(diag K) · I`` at the training designs."""
        K = self._prior_covariance(X)
        if self.design_mask is not None:
            # padding designs: independent N(0, 1), uncoupled from real ones
            m = self.design_mask.to(K)
            K = K * (m.unsqueeze(-1) * m.unsqueeze(-2)) + torch.diag_embed(1.0 - m)
        nugget = self._nugget
        if nugget is None:
            nugget = 1e-8 if K.dtype == torch.float64 else 1e-6
        if nugget:
            diag = K.diagonal(dim1=-2, dim2=-1)
            if self.design_mask is None:
                scale = diag.mean(-1, keepdim=True)
            else:  # the real designs' mean prior variance
                m = self.design_mask.to(diag)
                scale = (diag * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True)
            # in place on the kernel's fresh output (autograd checks that no
            # saved tensor is modified): no n x n diag_embed and no extra pass.
            # Without a graph K might be a kernel's stored tensor: copy it.
            if K.grad_fn is None:
                K = K.clone()
            K.diagonal(dim1=-2, dim2=-1).add_(nugget * scale)
        return K

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
        r"""Training: the approximate posterior at the designs, carrying the evidence
        (attribute ``evidence``, read by the matching MLL).
        Evaluation: the predictive posterior (prior if there is no data).

        Args:
            datapoints: Training mode: the training designs
                (``model.train_inputs[0]``). Evaluation: ``batch_shape x q x d``
                transformed test points.

        Returns:
            A ``MultivariateNormal``.
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
        # warm-starts from this one
        self._warm = state
        mvn = _mvn(state.mode, state.posterior_covariance())
        mvn.evidence = evidence
        return mvn

    def _predict(self, X: Tensor) -> MultivariateNormal:
        r"""Joint predictive distribution at transformed ``batch_shape x q x d``."""
        if self._has_no_data():
            mean = torch.zeros(X.shape[:-1], dtype=X.dtype, device=X.device)
            return _mvn(mean, self._prior_covariance(X))
        state = self._get_state()
        Xtr = self._train_inputs()
        mb = self.batch_shape
        q, d = X.shape[-2:]
        try:
            out_batch = torch.broadcast_shapes(X.shape[:-2], mb)
        except RuntimeError:
            raise InputDataError(
                f"X's batch shape {tuple(X.shape[:-2])} does not broadcast with the "
                f"model's batch shape {tuple(mb)}."
            ) from None
        k = len(mb)
        inner = out_batch[len(out_batch) - k :] if k else torch.Size()
        outer = out_batch[: len(out_batch) - k]
        E = math.prod(outer)
        Xe = X.expand(out_batch + (q, d)).reshape((E,) + inner + (q, d))
        n = Xtr.shape[-2]
        k_star = self.covar_module(Xe, Xtr).to_dense()  # E x inner x q x n
        if self.design_mask is not None:
            k_star = k_star * self.design_mask.to(k_star).unsqueeze(-2)
        k_ss = self.covar_module(Xe).to_dense()  # E x inner x q x q
        mean = (k_star @ state.alpha.unsqueeze(-1)).squeeze(-1)  # E x inner x q
        # one triangular solve for all E*q columns against [L, L C]
        rhs = k_star.movedim(0, -2).transpose(-1, -3)  # inner x n x E x q
        rhs = rhs.reshape(inner + (1, n, E * q))
        factors = state.predictive_factors()  # mb x 2 x n x n
        sol = torch.linalg.solve_triangular(
            factors, rhs.expand(inner + (2, n, E * q)), upper=False
        ).reshape(inner + (2, n, E, q))
        u, w = sol[..., 0, :, :, :], sol[..., 1, :, :, :]
        red = torch.einsum("...nei,...nej->...eij", w, w) - torch.einsum(
            "...nei,...nej->...eij", u, u
        )  # inner x E x q x q
        cov = k_ss + red.movedim(-3, 0)
        cov = 0.5 * (cov + cov.transpose(-1, -2))
        return _mvn(mean.reshape(out_batch + (q,)), cov.reshape(out_batch + (q, q)))

    # ------------------------------------------------------------ posterior
    def _validate_X(self, X: Tensor, name: str = "X") -> Tensor:
        if not isinstance(X, Tensor) or not X.is_floating_point():
            raise InputTypeError(
                f"{name} must be a floating torch.Tensor of shape batch_shape x q x d; "
                f"got {type(X).__name__}"
                + (f" of dtype {X.dtype}" if isinstance(X, Tensor) else "")
                + "."
            )
        if X.ndim < 2:
            raise InputDataError(
                f"{name} must have shape batch_shape x q x d; got {tuple(X.shape)}."
            )
        if not self._has_no_data() and X.shape[-1] != self.dim:
            raise InputDataError(
                f"{name} must have d={self.dim} features in its last dimension; got "
                f"shape {tuple(X.shape)}."
            )
        if not self._has_no_data() and X.dtype != self.datapoints.dtype:
            raise InputTypeError(
                f"{name} must have the model's dtype {self.datapoints.dtype}; got "
                f"{X.dtype} (convert with X.to(model.datapoints))."
            )
        return X

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
        mvn = self._predict(self.transform_inputs(X))
        if observation_noise is not False:
            cov = mvn.covariance_matrix
            if observation_noise is True:
                noise = torch.full(
                    cov.shape[:-1],
                    self.likelihood.noise_std**2,
                    dtype=cov.dtype,
                    device=cov.device,
                )
            else:
                noise = self._check_noise(observation_noise, cov.shape[:-1]).to(cov)
            mvn = _mvn(mvn.mean, cov + torch.diag_embed(noise))
        posterior = GPyTorchPosterior(mvn)
        if posterior_transform is not None:
            return posterior_transform(posterior)
        return posterior

    def predict_preference(self, X1: Tensor, X2: Tensor) -> Tensor:
        r"""Predictive probability that ``x1`` would be preferred to ``x2``.

        Integrates the answer model over the joint posterior of the two
        utilities: for the probit, ``Φ((μ1 - μ2) / √(s² + v1 + v2 - 2c))``
        with ``s = √2·σ``; for the logit, Gauss–Hermite quadrature.

        Args:
            X1: ``batch_shape x q x d`` first options.
            X2: ``batch_shape x q x d`` second options.

        Returns:
            A ``batch_shape x q`` tensor of probabilities.
        """
        X1, X2 = self._validate_X(X1, "X1"), self._validate_X(X2, "X2")
        if X1.shape != X2.shape:
            raise InputDataError(
                f"X1 and X2 must have the same shape; got {tuple(X1.shape)} and "
                f"{tuple(X2.shape)}."
            )
        X = torch.stack([X1, X2], dim=-2)  # batch x q x 2 x d
        mvn = self.posterior(X).mvn
        mean, cov = mvn.mean, mvn.covariance_matrix
        mu = mean[..., 0] - mean[..., 1]
        var = (cov[..., 0, 0] + cov[..., 1, 1] - 2 * cov[..., 0, 1]).clamp_min(0)
        return self.likelihood.predictive_probability(mu, var)

    @staticmethod
    def _check_noise(noise: object, shape: torch.Size) -> Tensor:
        r"""An ``observation_noise`` tensor of variances for ``shape``
        (``batch_shape x q``, a trailing 1 allowed), finite and ``>= 0``."""
        if not isinstance(noise, Tensor) or not noise.is_floating_point():
            raise InputTypeError(
                "observation_noise must be a bool or a floating tensor of "
                f"variances; got {type(noise).__name__}"
                + (f" of dtype {noise.dtype}." if isinstance(noise, Tensor) else ".")
            )
        values = noise.squeeze(-1) if noise.ndim and noise.shape[-1] == 1 else noise
        try:
            values = values.expand(shape)
        except RuntimeError:
            raise InputDataError(
                f"observation_noise must broadcast to batch_shape x q = "
                f"{tuple(shape)} (optionally x 1); got {tuple(noise.shape)}."
            ) from None
        if not bool((torch.isfinite(values) & (values >= 0)).all()):
            raise InputDataError(
                "observation_noise must hold finite variances >= 0; got "
                f"{noise.flatten()[:8].tolist()}."
            )
        return values

    def centred_posterior(
        self, X: Tensor, reference: Tensor | None = None
    ) -> GPyTorchPosterior:
        r"""Joint posterior of the centred utility ``g(x) - mean_r g(r)``.

        Comparisons only measure utility differences, so the level of ``g``
        keeps its prior uncertainty; subtracting the mean over a reference set
        removes it and leaves the band that the answers can actually narrow.

        Args:
            X: ``batch_shape x q x d`` points.
            reference: ``r x d`` (or ``batch_shape x r x d``) reference designs;
                default the training designs (of a masked model, each batch
                element's real designs, not its padding).

        Returns:
            A ``GPyTorchPosterior`` over the ``q`` centred utilities.
        """
        X = self._validate_X(X)
        weights = None  # of the reference designs in the mean: 1 / r each
        if reference is None:
            if self._has_no_data():
                raise UnsupportedError("reference is required for a prior-only model.")
            reference = self.datapoints
            if self.design_mask is not None:  # real designs only, per batch element
                m = self.design_mask.to(X.dtype)
                weights = m / m.sum(-1, keepdim=True)
        reference = self._validate_X(reference, "reference")
        batch = torch.broadcast_shapes(X.shape[:-2], reference.shape[:-2])
        q, r = X.shape[-2], reference.shape[-2]
        if weights is None:
            weights = torch.full((r,), 1.0 / r, dtype=X.dtype, device=X.device)
        joint = torch.cat(
            [
                X.expand(batch + X.shape[-2:]),
                reference.expand(batch + reference.shape[-2:]),
            ],
            dim=-2,
        )
        mvn = self.posterior(joint).mvn
        eye = torch.eye(q, dtype=X.dtype, device=X.device)
        T = torch.cat(
            [
                eye.expand(weights.shape[:-1] + (q, q)),
                -weights.unsqueeze(-2).expand(weights.shape[:-1] + (q, r)),
            ],
            dim=-1,
        )  # [batch x] q x (q + r)
        mean = (T @ mvn.mean.unsqueeze(-1)).squeeze(-1)
        cov = T @ mvn.covariance_matrix @ T.transpose(-1, -2)
        return GPyTorchPosterior(_mvn(mean, 0.5 * (cov + cov.transpose(-1, -2))))

    # -------------------------------------------------------- conditioning
    def fantasize(
        self,
        X: Tensor,
        sampler: Any,
        observation_noise: Tensor | bool | None = None,
        **kwargs: Any,
    ) -> PairwisePreferenceGP:
        r"""A fantasy model conditioned on sampled *answers* about ``X``.

        BoTorch's ``fantasize`` conditions on sampled real-valued outcomes,
        which a preference model cannot take (BoTorch issue #733). Here each
        fantasy samples the noisy utilities of the ``q`` options in ``X`` (the
        posterior plus the answer noise ``σ²`` of the likelihood, i.e. the
        Thurstone answer model) and records the option with the largest one as
        the winner over each other option. So ``qKnowledgeGradient`` and
        ``qMaxValueEntropy`` with pending points run on prefbo models.

        Args:
            X: ``batch_shape x q x d`` options; with ``q = 1`` each option is
                asked against the current best design (highest posterior mean
                among the training designs), as for max-value entropy.
            sampler: A BoTorch ``MCSampler`` with ``sample_shape = (F,)``.
            observation_noise: Ignored beyond the default (the likelihood's
                noise is always used: answers are noisy by definition).

        Returns:
            A model with batch shape ``F x batch_shape`` (and the model's), with
            ``q - 1`` new comparisons per fantasy.
        """
        if self._has_no_data():
            raise UnsupportedError("fantasize needs a model with data.")
        if X.shape[-2] == 1:  # one option: asked against the current best design
            with torch.no_grad():
                mean = self.posterior(self.datapoints.unsqueeze(-2)).mean
                best_idx = mean.squeeze(-1).squeeze(-1).argmax(-1)  # batch
                best = (
                    self.datapoints[..., best_idx, :]
                    if self.datapoints.ndim == 2
                    else (
                        self.datapoints.gather(
                            -2,
                            best_idx[..., None, None].expand(
                                best_idx.shape + (1, self.dim)
                            ),
                        ).squeeze(-2)
                    )
                )
            X = torch.cat([X, best.unsqueeze(-2).expand_as(X).to(X)], dim=-2)
        q = X.shape[-2]
        with torch.no_grad():
            post = self.posterior(X, observation_noise=True)
            Y = sampler(post).squeeze(-1)  # F x batch x q
        winner = Y.argmax(dim=-1, keepdim=True)  # F x batch x 1
        idx = torch.arange(q, device=X.device).expand(Y.shape)  # F x batch x q
        # the q - 1 losers of each fantasy, in their original order
        losers = idx[idx != winner].reshape(Y.shape[:-1] + (q - 1,))
        comps = torch.stack([winner.expand_as(losers), losers], dim=-1)
        Xf = X.expand(Y.shape[:-1] + X.shape[-2:])
        return self.condition_on_observations(Xf, comps, **kwargs)

    def condition_on_observations(self, X: Tensor, Y: Tensor, **kwargs: Any) -> Model:
        r"""A copy of the model with new designs and comparisons added.

        Args:
            X: ``batch_shape x n' x d`` new designs.
            Y: ``batch_shape x m' x 2`` comparisons indexing into ``X`` (0 is
                the first new design), as in BoTorch ``PairwiseGP``.

        Returns:
            The conditioned model (warm-started at the current mode).
        """
        X = validate_datapoints(X, name="X")
        d = None if self._has_no_data() else self.unconsolidated_datapoints.shape[-1]
        if d is not None and X.shape[-1] != d:
            raise InputDataError(
                f"X must have d={d} features like the training designs; got X of "
                f"shape {tuple(X.shape)}."
            )
        if not isinstance(Y, Tensor) or Y.shape[-1:] != (2,) or Y.ndim < 2:
            raise InputDataError(
                "Y must be a batch_shape x m x 2 tensor of comparisons indexing into "
                f"X; got {type(Y).__name__}"
                + (f" of shape {tuple(Y.shape)}" if isinstance(Y, Tensor) else "")
                + "."
            )
        Y = validate_comparisons(Y, n=X.shape[-2], name="Y")
        new_model = deepcopy(self)
        if self._has_no_data():
            new_model.set_train_data(X, Y, update_model=True)
            return new_model
        batch = torch.broadcast_shapes(
            Y.shape[:-2], X.shape[:-2], self.unconsolidated_datapoints.shape[:-2]
        )
        old_dp = self.unconsolidated_datapoints.expand(
            batch + self.unconsolidated_datapoints.shape[-2:]
        )
        old_cp = self.unconsolidated_comparisons.expand(
            batch + self.unconsolidated_comparisons.shape[-2:]
        )
        X = X.to(old_dp).expand(batch + X.shape[-2:])
        Y = Y.expand(batch + Y.shape[-2:])
        new_dp = torch.cat([old_dp, X], dim=-2)
        new_cp = torch.cat([old_cp, Y + old_dp.shape[-2]], dim=-2)
        # padding stays padding; the new designs and comparisons are real
        masks = {}
        for name, old, new in (
            ("design_mask", self.design_mask, X.shape[-2]),
            ("comparison_mask", self.comparison_mask, Y.shape[-2]),
        ):
            if old is not None:
                old = old.expand(batch + old.shape[-1:])
                masks[name] = torch.cat([old, old.new_ones(batch + (new,))], dim=-1)
        with torch.no_grad():
            new_mean = self.posterior(X).mean.squeeze(-1)  # batch x n'
            init = torch.cat([self.utility.expand(batch + (self.n,)), new_mean], dim=-1)
        new_model.set_train_data(new_dp, new_cp, update_model=False, **masks)
        # warm start at [current mode, predicted mean] unless designs were merged
        same_layout = new_model.n == self.n + X.shape[-2] and (
            self.consolidated_indices is None
            or bool(
                (
                    self.consolidated_indices
                    == torch.arange(len(self.consolidated_indices), device=X.device)
                ).all()
            )
        )
        new_model._warm = self._conditioned_start(init) if same_layout else None
        new_model._get_state()
        return new_model

    def _conditioned_start(self, init: Tensor) -> Any:
        r"""Warm start of :meth:`condition_on_observations`'s model: ``init``,
        the current mode followed by the predicted means of the new designs."""
        return init

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
