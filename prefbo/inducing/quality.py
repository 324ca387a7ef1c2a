r"""Quality functions ``q`` of the inducing-point DPP ``L = diag(q) K diag(q)``.

prefbo's quality functions are BoTorch ``QualityFunction`` s with two
extensions: they are batched (``batch_shape x n x d`` inputs give
``batch_shape x n`` scores) and they receive the number ``m`` of inducing
points, on which the ENT-DPP quality depends through its ``1/m`` exponent.
Only ratios of qualities matter to the greedy MAP, so qualities may be
normalised (ENT-DPP's are scaled to a maximum of one to avoid overflow).
"""

from __future__ import annotations

import warnings
from abc import abstractmethod

import torch
from botorch.models.model import Model
from botorch.models.utils.inducing_point_allocators import (
    QualityFunction as BoTorchQualityFunction,
)
from gpytorch.settings import skip_posterior_variances
from linear_operator.utils.warnings import (
    NumericalWarning as LinearOperatorNumericalWarning,
)
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.inducing.max_value import gumbel_max_moments, max_value_information_gain
from prefbo.utils.checks import check_float, check_int

_METHODS = ("gumbel", "thompson")


class QualityFunction(BoTorchQualityFunction):
    r"""A batched quality function that may depend on the number of inducing points."""

    @abstractmethod
    def __call__(self, inputs: Tensor, num_inducing: int = 1) -> Tensor:
        r"""Score the candidate inputs.

        Args:
            inputs: A ``batch_shape x n x d`` tensor.
            num_inducing: Number ``m`` of inducing points being chosen.

        Returns:
            A ``batch_shape x n`` tensor of non-negative qualities.
        """


class UnitQuality(QualityFunction):
    r"""``q ≡ 1``: the DPP is ``K`` itself and its greedy MAP is CVR."""

    def __call__(self, inputs: Tensor, num_inducing: int = 1) -> Tensor:
        r"""Ones of shape ``batch_shape x n`` for ``batch_shape x n x d`` inputs."""
        return torch.ones(inputs.shape[:-1], dtype=inputs.dtype, device=inputs.device)


class MaxValueEntropyQuality(QualityFunction):
    r"""ENT-DPP quality ``q_z = exp((1 - α) · IG_z / (α · m))`` (Moss et al.).

    Derivation. ENT-DPP maximises
    ``α · MI(y_Z; f) + (1 - α) · IG(y_Z; f*)`` over inducing sets ``Z`` of size
    ``m``. With ``MI ∝ ½ log det K_Z`` and ``IG(y_Z; f*)`` bounded below by the
    average single-point gain ``(1/m) Σ_{z ∈ Z} IG_z``, the objective is, up to
    the positive factor ``α/2``,

        ``log det K_Z + (2(1 - α) / (α m)) Σ_z IG_z = log det L_Z``,

    with ``L = diag(q) K diag(q)`` and ``log q_z = (1 - α) IG_z / (α m)``. So
    ``α = 1`` gives ``q ≡ 1`` (pure CVR) and ``α → 0`` lets the quality
    dominate, as the paper's text says (Moss, Ober & Picheny 2022,
    "Information-theoretic inducing point placement for high-throughput
    Bayesian optimisation"). The paper's printed formula for ``q`` has the
    exponent's α-factor inverted (``α/(1 - α)``, which would make ``α = 1``
    the pure-quality end and diverge there); prefbo follows the derivation
    above.

    Sign convention (``maximize=True``): ``IG_z`` uses
    ``γ = (μ* - ŷ_z) / σ*``, where ``ŷ_z`` is the model's posterior mean at
    ``z`` and ``μ*``, ``σ*`` the mean and standard deviation of samples of the
    maximum ``f*``. ``IG`` decreases in ``γ``, so quality rises as ``ŷ_z``
    approaches or exceeds the typical maximum. With ``maximize=False`` the
    utility is negated: ``max_samples`` are then samples of the minimum and
    ``γ = (ŷ_z - μ_min) / σ_min``.

    ``μ*`` and ``σ*`` are estimated on a candidate set ``C`` of at most
    ``num_candidates`` inputs per batch element (half of them those with the
    largest posterior mean, the rest uniformly at random with torch's global
    RNG), by ``max_value_method``:

    - ``"thompson"`` (default): ``num_max_samples`` joint samples
      ``model.posterior(C).rsample``, maximised over ``C``. The joint
      covariance of many nearby candidates is often numerically singular;
      the jitter that linear_operator then adds (and its ``NumericalWarning``,
      silenced here) is immaterial to the moments of the maximum;
    - ``"gumbel"``: :func:`gumbel_max_moments` of the marginals
      ``model.posterior(C).mean/variance``: deterministic given ``C`` and free
      of Cholesky factorisations, but it treats the candidates as independent
      and so overestimates ``μ*`` when they are many and correlated, which
      flattens the quality towards CVR;

    or from precomputed ``max_samples``.

    Qualities are returned normalised to a maximum of one per batch element
    (``exp(c (IG - max IG))``, ``c = (1 - α)/(α m)``); only ratios matter to
    the DPP. ``q²`` underflows to 0 (the candidate is then chosen only after
    all others) where ``c (max IG - IG_z)`` exceeds about 350 in float64 or
    44 in float32; as ``IG`` is at most a few units, only for tiny ``α``.
    """

    def __init__(
        self,
        model: Model,
        alpha: float = 0.5,
        num_max_samples: int = 128,
        max_samples: Tensor | None = None,
        num_candidates: int = 1024,
        maximize: bool = True,
        chunk_size: int = 1024,
        max_value_method: str = "thompson",
    ) -> None:
        r"""
        Args:
            model: Any one-output BoTorch model (regression or preference);
                only ``model.posterior(X)``'s ``mean``, ``rsample`` (Thompson)
                and ``variance`` (Gumbel) are used. It is called on the raw
                inputs given to the allocator (same space, same batch shape).
            alpha: Trade-off ``α ∈ (0, 1]`` between information about the whole
                function (``α = 1``: CVR) and about its maximum.
            num_max_samples: Number of Thompson samples of ``f*`` (``≥ 2``;
                for ``max_value_method="thompson"``).
            max_samples: Optional precomputed samples of ``f*`` (of the minimum
                if ``maximize=False``), a ``num_samples`` or
                ``num_samples x batch_shape`` tensor, ``num_samples ≥ 2``.
            num_candidates: Size of the candidate set on which ``f*`` is
                sampled (the inputs themselves when there are fewer).
            maximize: Whether the utility is maximised (see sign convention).
            chunk_size: The posterior mean at the ``n`` inputs is computed
                ``chunk_size`` inputs at a time (a model's posterior may build
                a ``chunk_size²`` joint covariance per call).
            max_value_method: ``"gumbel"`` or ``"thompson"`` (see above).
        """
        if max_value_method not in _METHODS:
            raise InputDataError(
                f"max_value_method must be one of {_METHODS}; got {max_value_method!r}."
            )
        if not callable(getattr(model, "posterior", None)):
            raise InputTypeError(
                "model must be a BoTorch Model with a posterior method; got "
                f"{type(model).__name__}."
            )
        num_outputs = getattr(model, "num_outputs", 1)
        if num_outputs != 1:
            raise UnsupportedError(
                f"model must have one output; got num_outputs={num_outputs}. Use a "
                "one-output model or a ScalarizedPosteriorTransform-wrapped one."
            )
        alpha = check_float("alpha", alpha, minimum=0, maximum=1, open_minimum=True)
        num_max_samples = check_int("num_max_samples", num_max_samples, 2)
        num_candidates = check_int("num_candidates", num_candidates, 1)
        chunk_size = check_int("chunk_size", chunk_size, 1)
        if max_samples is not None:
            if (
                not isinstance(max_samples, Tensor)
                or not max_samples.is_floating_point()
            ):
                raise InputTypeError(
                    "max_samples must be a floating-point tensor; got "
                    f"{type(max_samples).__name__}."
                )
            if max_samples.ndim < 1 or max_samples.shape[0] < 2:
                raise InputDataError(
                    "max_samples must have shape num_samples x batch_shape with "
                    f"num_samples >= 2; got shape {tuple(max_samples.shape)}."
                )
            if not bool(torch.isfinite(max_samples).all()):
                raise InputDataError("max_samples must be finite; got NaN or inf.")
        self.model = model
        self.alpha = float(alpha)
        self.num_max_samples = num_max_samples
        self.max_samples = max_samples
        self.num_candidates = num_candidates
        self.maximize = maximize
        self.chunk_size = chunk_size
        self.max_value_method = max_value_method

    @torch.no_grad()
    def posterior_mean(self, inputs: Tensor) -> Tensor:
        r"""The model's posterior mean, in chunks of ``chunk_size`` inputs.

        Under GPyTorch's ``skip_posterior_variances`` (which GPyTorch exact GPs
        honour and other models ignore), since only the mean is needed.

        Args:
            inputs: A ``batch_shape x n x d`` tensor.

        Returns:
            A ``batch_shape x n`` tensor (negated when ``maximize=False``).
        """
        batch_shape, n = inputs.shape[:-2], inputs.shape[-2]
        chunks = []
        for start in range(0, n, self.chunk_size):
            chunk = inputs[..., start : start + self.chunk_size, :]  # batch x c x d
            with skip_posterior_variances():  # GPyTorch models: mean only
                post = self.model.posterior(chunk)
            chunks.append(post.mean.squeeze(-1))  # batch x c
        mean = torch.cat(chunks, dim=-1)  # batch' x n
        if mean.shape != batch_shape + (n,):
            raise UnsupportedError(
                f"the model's posterior mean at inputs of shape {tuple(inputs.shape)} "
                f"has shape {tuple(mean.shape)}; expected {tuple(batch_shape + (n,))}"
                ". A batched model needs inputs with its batch shape."
            )
        return mean.to(inputs) if self.maximize else -mean.to(inputs)

    def candidates(self, inputs: Tensor, mean: Tensor) -> Tensor:
        r"""The candidate set on which the maximum is estimated.

        Args:
            inputs: A ``batch_shape x n x d`` tensor.
            mean: Its ``batch_shape x n`` (sign-adjusted) posterior mean.

        Returns:
            A ``batch_shape x c x d`` tensor, ``c = min(num_candidates, n)``:
            the ``c // 2`` inputs of largest mean, then inputs drawn uniformly
            without replacement (all inputs when ``c = n``).
        """
        n, d = inputs.shape[-2:]
        c = min(self.num_candidates, n)
        if c == n:
            return inputs
        keys = torch.rand(mean.shape, dtype=inputs.dtype, device=inputs.device)
        keys.scatter_(-1, mean.topk(c // 2, dim=-1).indices, 2.0)  # top means first
        idx = keys.topk(c, dim=-1).indices  # batch x c
        return inputs.gather(-2, idx.unsqueeze(-1).expand(idx.shape + (d,)))

    @torch.no_grad()
    def max_moments(self, inputs: Tensor, mean: Tensor) -> tuple[Tensor, Tensor]:
        r"""Mean ``μ*`` and standard deviation ``σ*`` of the maximum ``f*``.

        Args:
            inputs: A ``batch_shape x n x d`` tensor.
            mean: Its ``batch_shape x n`` (sign-adjusted) posterior mean.

        Returns:
            ``(μ*, σ*)``, each ``batch_shape x 1``.
        """
        sign = 1.0 if self.maximize else -1.0
        if self.max_samples is not None:
            samples = sign * self.max_samples.to(inputs)  # S x batch
            mu, sd = samples.mean(0), samples.std(0)
        else:
            cand = self.candidates(inputs, mean)  # batch x c x d
            posterior = self.model.posterior(cand)
            if self.max_value_method == "gumbel":
                mu, sd = gumbel_max_moments(
                    sign * posterior.mean.squeeze(-1).to(inputs),
                    posterior.variance.squeeze(-1).to(inputs).clamp_min(0).sqrt(),
                )
            else:
                with warnings.catch_warnings():
                    # jitter on a near-singular candidate covariance is immaterial
                    # to the moments of the maximum
                    warnings.simplefilter("ignore", LinearOperatorNumericalWarning)
                    f = posterior.rsample(torch.Size([self.num_max_samples]))
                f = f.squeeze(-1)  # S x batch x c
                samples = (sign * f).amax(-1).to(inputs)  # S x batch
                mu, sd = samples.mean(0), samples.std(0)
        try:
            mu = mu.expand(mean.shape[:-1]).unsqueeze(-1)  # batch x 1
            sd = sd.expand(mean.shape[:-1]).unsqueeze(-1)
        except RuntimeError as err:
            raise InputDataError(
                "max_samples must have shape num_samples x batch_shape with "
                f"batch_shape {tuple(mean.shape[:-1])} of the inputs (or no batch "
                f"dimensions); got shape {tuple(self.max_samples.shape)}."
            ) from err
        return mu, sd.clamp_min(torch.finfo(sd.dtype).eps * (1.0 + mu.abs()))

    @torch.no_grad()
    def information_gain(self, inputs: Tensor) -> Tensor:
        r"""Single-point gains ``IG_z`` about the maximum.

        Args:
            inputs: A ``batch_shape x n x d`` tensor.

        Returns:
            A ``batch_shape x n`` tensor of gains ``≥ 0``.
        """
        mean = self.posterior_mean(inputs)  # batch x n
        mu, sd = self.max_moments(inputs, mean)  # batch x 1 each
        return max_value_information_gain((mu - mean) / sd)

    def __call__(self, inputs: Tensor, num_inducing: int = 1) -> Tensor:
        r"""Normalised qualities ``exp(c (IG_z - max IG))``, ``c = (1-α)/(α m)``.

        Args:
            inputs: A ``batch_shape x n x d`` tensor.
            num_inducing: Number ``m`` of inducing points being chosen.

        Returns:
            A ``batch_shape x n`` tensor with values in ``[0, 1]`` (all ones
            when ``α = 1``).
        """
        gain = self.information_gain(inputs)  # batch x n
        coef = (1.0 - self.alpha) / (self.alpha * num_inducing)
        log_q = coef * gain
        return torch.exp(log_q - log_q.amax(-1, keepdim=True))
