r"""Predictions of a pairwise preference GP from its Gaussian approximation.

With ``K = L Lᵀ`` at the training designs and ``C`` the factor of
``I + Lᵀ Ŵ L`` (:class:`~prefbo.inference.GaussianApproximation`), the joint
predictive distribution at ``q`` points is ``N(k*ᵀ α, k** - uᵀu + wᵀw)`` with
``u = L⁻¹ k*`` and ``w = (L C)⁻¹ k*``; many q-batches are solved at once.
Here too are the input checks of the prediction methods and the predictions
derived from the joint posterior (preference probabilities, utilities centred
on a reference set).
"""

from __future__ import annotations

import math

import torch
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.inference.gaussian import GaussianApproximation
from prefbo.posteriors.gaussian import mvn


def check_test_points(
    X: object, name: str, dim: int | None, dtype: torch.dtype | None
) -> Tensor:
    r"""Validate points to predict at.

    Args:
        X: A floating ``batch_shape x q x d`` tensor of finite points.
        name: Its argument name, for messages.
        dim: The model's ``d`` (``None`` for a prior-only model: any).
        dtype: The model's dtype (``None`` for a prior-only model: any).

    Returns:
        ``X``.
    """
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
    if dim is not None and X.shape[-1] != dim:
        raise InputDataError(
            f"{name} must have d={dim} features in its last dimension; got "
            f"shape {tuple(X.shape)}."
        )
    if dtype is not None and X.dtype != dtype:
        raise InputTypeError(
            f"{name} must have the model's dtype {dtype}; got "
            f"{X.dtype} (convert with X.to(model.datapoints))."
        )
    check_finite_points(X, name)
    return X


def check_finite_points(X: Tensor, name: str) -> None:
    r"""Raise if a point of ``X`` (``... x d``) has a non-finite entry.

    A NaN or infinite test point would otherwise flow through the kernel into
    a NaN prediction without an error. One ``isfinite`` pass per call.

    Raises:
        InputDataError: Naming ``name``, the index of the first offending
            point (its batch indices and row) and its values.
    """
    finite = torch.isfinite(X).all(-1)
    if not bool(finite.all()):
        bad = ~finite
        row = tuple(bad.nonzero()[0].tolist())
        raise InputDataError(
            f"{name} must be finite; got row {row} = {X[row].tolist()} "
            f"({int(bad.sum())} of {bad.numel()} points of {name} of shape "
            f"{tuple(X.shape)} non-finite)."
        )


def check_noise(noise: object, shape: torch.Size) -> Tensor:
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


def with_observation_noise(
    dist: MultivariateNormal, observation_noise: bool | Tensor, noise_std: float
) -> MultivariateNormal:
    r"""``dist`` with the utility noise added to its diagonal.

    Args:
        dist: The ``batch_shape x q`` predictive distribution.
        observation_noise: ``True`` for the likelihood's ``noise_std²``, or a
            tensor of variances (see :func:`check_noise`).
        noise_std: The likelihood's utility noise ``σ``.

    Returns:
        A ``MultivariateNormal`` with the noise on the diagonal.
    """
    cov = dist.covariance_matrix
    if observation_noise is True:
        noise = torch.full(
            cov.shape[:-1], noise_std**2, dtype=cov.dtype, device=cov.device
        )
    else:
        noise = check_noise(observation_noise, cov.shape[:-1]).to(cov)
    return mvn(dist.mean, cov + torch.diag_embed(noise))


def predictive_mvn(
    state: GaussianApproximation,
    covar_module: Kernel,
    X: Tensor,
    Xtr: Tensor,
    design_mask: Tensor | None,
) -> MultivariateNormal:
    r"""Joint predictive distribution of the utilities at ``X``.

    Args:
        state: The approximation at the training designs (``batch_shape``,
            the model's batch).
        covar_module: The kernel.
        X: ``batch_shape' x q x d`` transformed points, ``batch_shape'``
            broadcasting with the model's.
        Xtr: ``batch_shape x n x d`` transformed training designs.
        design_mask: Optional ``batch_shape x n`` bool (False: padding
            designs, which do not influence predictions).

    Returns:
        A ``MultivariateNormal`` of mean ``out_batch x q`` and covariance
        ``out_batch x q x q``, ``out_batch`` the broadcast batch.
    """
    mb = Xtr.shape[:-2]
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
    k_star = covar_module(Xe, Xtr).to_dense()  # E x inner x q x n
    if design_mask is not None:
        k_star = k_star * design_mask.to(k_star).unsqueeze(-2)
    k_ss = covar_module(Xe).to_dense()  # E x inner x q x q
    mean = (k_star @ state.alpha.unsqueeze(-1)).squeeze(-1)  # E x inner x q
    # one triangular solve for all E*q columns against [L, L C]
    rhs = k_star.movedim(0, -2).transpose(-1, -3)  # inner x n x E x q
    rhs = rhs.reshape(inner + (1, n, E * q))
    if state._projector is not None:  # stiff curvature: k** - uᵀ P u
        red = -_projected_reduction(state, rhs, inner, n, E, q)
    else:
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
    return mvn(mean.reshape(out_batch + (q,)), cov.reshape(out_batch + (q, q)))


def _projected_reduction(
    state: GaussianApproximation, rhs: Tensor, inner, n: int, E: int, q: int
) -> Tensor:
    r"""``uᵀ P u`` (``inner x E x q x q``) with ``u = L⁻¹ k*``, the variance
    the answers remove under a stiff curvature (``P = I - A⁻¹``, eigenvalues in
    ``[0, 1]``: the result lies between ``0`` and ``uᵀu``)."""
    u = torch.linalg.solve_triangular(
        state.chol_prior, rhs.squeeze(-3), upper=False
    )  # inner x n x E*q
    Pu = state._projector @ u
    u, Pu = u.reshape(inner + (n, E, q)), Pu.reshape(inner + (n, E, q))
    return torch.einsum("...nei,...nej->...eij", u, Pu)


def centring_matrix(q: int, weights: Tensor) -> Tensor:
    r"""``T = [I, -1 wᵀ]``: ``T g`` subtracts the ``weights``-mean of the last
    ``r`` entries of ``g`` from each of its first ``q``.

    Args:
        q: Number of points to centre.
        weights: ``[batch_shape x] r`` weights of the reference designs.

    Returns:
        ``[batch_shape x] q x (q + r)``.
    """
    r = weights.shape[-1]
    eye = torch.eye(q, dtype=weights.dtype, device=weights.device)
    return torch.cat(
        [
            eye.expand(weights.shape[:-1] + (q, q)),
            -weights.unsqueeze(-2).expand(weights.shape[:-1] + (q, r)),
        ],
        dim=-1,
    )  # [batch x] q x (q + r)


def transformed_mvn(T: Tensor, dist: MultivariateNormal) -> MultivariateNormal:
    r"""The distribution of ``T g`` for ``g ~ dist`` (covariance symmetrised).

    Args:
        T: ``[batch_shape x] q x p`` matrix.
        dist: ``batch_shape x p`` distribution.

    Returns:
        ``batch_shape x q`` ``MultivariateNormal``.
    """
    mean = (T @ dist.mean.unsqueeze(-1)).squeeze(-1)
    cov = T @ dist.covariance_matrix @ T.transpose(-1, -2)
    return mvn(mean, 0.5 * (cov + cov.transpose(-1, -2)))


class DerivedPredictionsMixin:
    r"""Predictions derived from a model's joint ``posterior``: preference
    probabilities and centred utilities, for
    :class:`~prefbo.models.PairwisePreferenceGP`."""

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
        dist = self.posterior(X).mvn
        mean, cov = dist.mean, dist.covariance_matrix
        mu = mean[..., 0] - mean[..., 1]
        var = (cov[..., 0, 0] + cov[..., 1, 1] - 2 * cov[..., 0, 1]).clamp_min(0)
        return self.likelihood.predictive_probability(mu, var)

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
        T = centring_matrix(q, weights)  # [batch x] q x (q + r)
        return GPyTorchPosterior(transformed_mvn(T, self.posterior(joint).mvn))
