r"""Base classes of prefbo's preference likelihoods.

A preference likelihood scores *answers* (comparisons, orderings, choices),
each of which touches a few latent values: ``p`` entries of the
``batch_shape x n x d`` array of latent values at the designs (``d``
utilities per design, or one utility per label). A subclass says which
latents each answer touches (:meth:`PreferenceLikelihood._index`) and how the
log-probability of the answer depends on them
(:meth:`PreferenceLikelihood._log_prob_latents`); the base class turns that
into

- :meth:`~PreferenceLikelihood.log_prob_answers` — the exact
  ``log p(answer_k | f)`` for given utilities, ``batch_shape x k``;
- :meth:`~PreferenceLikelihood.expected_log_prob_answers` —
  ``E_q[log p(answer_k | f)]`` for Gaussian moments ``q`` at the designs
  (QMC by default; Gauss–Hermite for one-difference answers), the data term
  of the ELBO;
- :meth:`~PreferenceLikelihood.log_marginal_answers` —
  ``log E_q[p(answer_k | f)]``, the predictive log-probability;
- GPyTorch's ``expected_log_prob(observations, function_dist, ...)`` and
  ``log_marginal(...)``, taking a (multitask) ``MultivariateNormal``.

Each likelihood declares the data container it reads
(:attr:`PreferenceLikelihood.data_type`); :meth:`~PreferenceLikelihood.check_data`
checks a container against it.

Noise convention: ``noise_std`` is σ, the noise on each design's
(or label's) utility, so a utility difference is standardised by
``s = √2·σ``. A paper writing ``Φ(Δ/σ_paper)`` has ``σ_paper = s``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import Likelihood
from linear_operator import to_dense
from linear_operator.operators import LinearOperator
from torch import Tensor
from torch.distributions import Bernoulli

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.likelihoods.quadrature import (
    distribution_moments,
    gaussian_expectation_qmc,
    latent_moments,
    single_output_covariance,
)
from prefbo.utils.checks import check_int, check_positive_float
from prefbo.utils.logspace import log1mexp


@dataclass(frozen=True)
class AnswerIndex:
    r"""Which latent values each of ``k`` answers touches.

    Attributes:
        designs: A ``k x p`` long tensor of design indices (0 on padding).
        outputs: A ``k x p`` long tensor of latent indices in ``[0, d)``.
        mask: An optional ``k x p`` bool tensor, ``False`` on padding slots.
        split: For likelihoods with two kinds of answers (preferred /
            indiscernible, preferred / conflicting): answers ``[0, split)``
            are of the first kind, the rest of the second.
        extra: An optional likelihood-specific tensor with ``k`` leading
            (e.g. the ``k x s`` chosen mask of choice sets).
    """

    designs: Tensor
    outputs: Tensor
    mask: Tensor | None = None
    split: int | None = None
    extra: Tensor | None = None


def check_index_tensor(
    x: object,
    name: str,
    upper: int,
    *,
    width: int | None = None,
    ndim: int = 2,
    padding: bool = False,
    shape_text: str = "k x 2",
) -> Tensor:
    r"""Check an integer index tensor and return it as ``long``.

    Args:
        x: The tensor to check.
        name: The argument's name, for messages.
        upper: Indices must lie in ``[0, upper)``.
        width: The required size of the last dimension (``None``: any).
        ndim: The required number of dimensions.
        padding: Whether ``-1`` (padding) is allowed too.
        shape_text: The expected shape, for messages.

    Returns:
        ``x`` as a long tensor.
    """
    if not isinstance(x, Tensor):
        raise InputTypeError(
            f"{name} must be a torch.Tensor of shape {shape_text}; got "
            f"{type(x).__name__}."
        )
    if x.dtype == torch.bool or x.is_floating_point() or x.is_complex():
        raise InputTypeError(
            f"{name} must be an integer (long) tensor of indices; got {x.dtype}."
        )
    if x.ndim != ndim or (width is not None and x.shape[-1] != width):
        raise InputDataError(
            f"{name} must have shape {shape_text}; got {tuple(x.shape)}."
        )
    x = x.long()
    if x.numel() > 0:
        lo, hi = int(x.min()), int(x.max())
        low = -1 if padding else 0
        if lo < low or hi >= upper:
            pad = " or -1 for padding" if padding else ""
            raise InputDataError(
                f"{name} must hold indices in [0, {upper - 1}]{pad}; got min {lo}, "
                f"max {hi}."
            )
    return x


def check_distinct_pairs(pairs: Tensor, name: str) -> None:
    r"""Check that no ``[i, j]`` row of ``pairs`` compares a design with itself.

    Args:
        pairs: An ``m x 2`` long tensor (already index-checked).
        name: The argument's name, for messages.
    """
    same = pairs[..., 0] == pairs[..., 1]
    if pairs.numel() > 0 and bool(same.any()):
        row = int(same.reshape(-1).nonzero()[0])
        raise InputDataError(
            f"{name} must pair two different designs; row {row} is "
            f"{pairs.reshape(-1, 2)[row].tolist()}."
        )


class PreferenceLikelihood(Likelihood, ABC):
    r"""Base class of likelihoods of preference answers given latent utilities.

    Subclasses implement :meth:`_index` (validate the answers, say which
    latents each touches) and :meth:`_log_prob_latents` (the log-probability
    of each answer from those latents). Single-utility likelihoods set
    ``multi_output = False`` and take utilities of shape ``batch_shape x n``;
    the others take ``batch_shape x n x d``.

    Attributes:
        multi_output: Whether the likelihood reads ``d`` latents per design
            (``batch_shape x n x d``) or one utility (``batch_shape x n``).
        data_type: The :mod:`prefbo.data` container whose ``answers`` are
            this likelihood's ``*answers`` (``None``: any container).
    """

    multi_output: ClassVar[bool] = True
    data_type: ClassVar[type | None] = None

    def __init__(
        self,
        noise_std: float = 1.0,
        num_samples: int = 256,
        num_points: int = 20,
        qmc_seed: int = 0,
    ) -> None:
        r"""
        Args:
            noise_std: σ, the standard deviation of the noise on each latent
                utility (fixed: only ``outputscale / σ²`` is identifiable).
                Differences are standardised by ``s = √2·σ``.
            num_samples: Number of scrambled Sobol points for expectations
                over answers that touch more than one difference.
            num_points: Number of Gauss–Hermite nodes for answers that touch
                one difference.
            qmc_seed: Scrambling seed of the Sobol points (fixed: the
                expected log-likelihood is a deterministic function).
        """
        super().__init__(max_plate_nesting=1)
        self.noise_std = check_positive_float("noise_std", noise_std)
        self.num_samples = check_int("num_samples", num_samples, 1)
        self.num_points = check_int("num_points", num_points, 1)
        self.qmc_seed = check_int("qmc_seed", qmc_seed, 0)

    @property
    def scale(self) -> float:
        r"""``s = √2·σ``, the scale of a utility difference."""
        return math.sqrt(2.0) * self.noise_std

    def check_data(self, data: object) -> None:
        r"""Check that ``data`` is a container this likelihood reads.

        Args:
            data: A preference data container (e.g.
                :class:`~prefbo.data.PairwiseComparisons`).

        Raises:
            InputTypeError: ``data`` is not a :attr:`data_type`.
        """
        if self.data_type is not None and not isinstance(data, self.data_type):
            raise InputTypeError(
                f"{type(self).__name__} reads {self.data_type.__name__} data; got "
                f"{type(data).__name__}."
            )

    @abstractmethod
    def _index(
        self, num_designs: int, num_outputs: int, *answers: Tensor
    ) -> AnswerIndex:
        r"""Validate the answers and return the latents each touches."""

    @abstractmethod
    def _log_prob_latents(self, latents: Tensor, index: AnswerIndex) -> Tensor:
        r"""Map ``... x k x p`` latents to ``... x k`` answer log-probabilities."""

    # ------------------------------------------------------------------ inputs
    def _as_latents(self, utilities: object, name: str = "utilities") -> Tensor:
        shape_text = "batch_shape x n x d" if self.multi_output else "batch_shape x n"
        if not isinstance(utilities, Tensor) or not utilities.is_floating_point():
            got = utilities.dtype if isinstance(utilities, Tensor) else type(utilities)
            raise InputTypeError(
                f"{name} must be a floating torch.Tensor of shape {shape_text}; got "
                f"{got}."
            )
        if utilities.ndim < (2 if self.multi_output else 1):
            raise InputDataError(
                f"{name} must have shape {shape_text}; got {tuple(utilities.shape)}."
            )
        return utilities if self.multi_output else utilities.unsqueeze(-1)

    def _as_moments(
        self, mean: object, covariance: Tensor | LinearOperator
    ) -> tuple[Tensor, Tensor]:
        mean = self._as_latents(mean, name="mean")
        covariance = to_dense(covariance)
        if not isinstance(covariance, Tensor) or not covariance.is_floating_point():
            got = (
                covariance.dtype
                if isinstance(covariance, Tensor)
                else type(covariance).__name__
            )
            raise InputTypeError(
                f"covariance must be a floating torch.Tensor or LinearOperator; got "
                f"{got}."
            )
        if not self.multi_output:
            covariance = single_output_covariance(mean[..., 0], covariance)
        return mean, covariance

    def _prepare(self, latents: Tensor, answers: tuple) -> AnswerIndex:
        device = latents.device
        answers = tuple(a.to(device) if isinstance(a, Tensor) else a for a in answers)
        return self._index(latents.shape[-2], latents.shape[-1], *answers)

    # ----------------------------------------------------------------- public
    def log_prob_answers(self, utilities: Tensor, *answers: Tensor) -> Tensor:
        r"""Exact log-probability of each answer given the utilities.

        Args:
            utilities: ``batch_shape x n x d`` latent values at the designs
                (``batch_shape x n`` for single-utility likelihoods).
            *answers: The answer tensors, as documented by the subclass.

        Returns:
            A ``batch_shape x k`` tensor, one entry per answer.
        """
        latents = self._as_latents(utilities)
        index = self._prepare(latents, answers)
        x = latents[..., index.designs, index.outputs]  # batch x k x p
        if index.mask is not None:
            x = torch.where(index.mask, x, torch.zeros_like(x))
        return self._log_prob_latents(x, index)

    def expected_log_prob_answers(
        self,
        mean: Tensor,
        covariance: Tensor | LinearOperator,
        *answers: Tensor,
        num_samples: int | None = None,
    ) -> Tensor:
        r"""``E_q[log p(answer_k | f)]`` for Gaussian latents at the designs.

        Args:
            mean: ``batch_shape x n x d`` means (``batch_shape x n`` for
                single-utility likelihoods).
            covariance: Their covariance in a layout of
                :mod:`prefbo.likelihoods.quadrature`: variances (``mean``'s
                shape), per design ``batch_shape x n x d x d``, or the joint
                ``batch_shape x n·d x n·d`` (design-major); single-utility:
                ``batch_shape x n`` or ``batch_shape x n x n``.
            *answers: The answer tensors, as documented by the subclass.
            num_samples: Overrides the likelihood's number of QMC points.

        Returns:
            A ``batch_shape x k`` tensor, one expectation per answer.
        """
        return self._gaussian(mean, covariance, answers, num_samples, False)

    def log_marginal_answers(
        self,
        mean: Tensor,
        covariance: Tensor | LinearOperator,
        *answers: Tensor,
        num_samples: int | None = None,
    ) -> Tensor:
        r"""``log E_q[p(answer_k | f)]``, the predictive log-probability.

        Same arguments as :meth:`expected_log_prob_answers`.

        Returns:
            A ``batch_shape x k`` tensor.
        """
        return self._gaussian(mean, covariance, answers, num_samples, True)

    def _gaussian(
        self,
        mean: Tensor,
        covariance: Tensor | LinearOperator,
        answers: tuple,
        num_samples: int | None,
        log_mean_exp: bool,
    ) -> Tensor:
        mean, covariance = self._as_moments(mean, covariance)
        index = self._prepare(mean, answers)
        m, c = latent_moments(
            mean, covariance, index.designs, index.outputs, index.mask
        )  # batch x k x p, batch x k x p x p
        num = self.num_samples if num_samples is None else int(num_samples)
        return self._expectation(m, c, index, num, log_mean_exp)

    def _expectation(
        self,
        mean: Tensor,
        covariance: Tensor,
        index: AnswerIndex,
        num_samples: int,
        log_mean_exp: bool,
    ) -> Tensor:
        r"""Gaussian expectation over each answer's latents (QMC by default)."""
        return gaussian_expectation_qmc(
            lambda x: self._log_prob_latents(x, index),
            mean,
            covariance,
            num_samples=num_samples,
            seed=self.qmc_seed,
            log_mean_exp=log_mean_exp,
        )

    # ---------------------------------------------------------------- GPyTorch
    def expected_log_prob(
        self,
        observations: Tensor,
        function_dist: MultivariateNormal,
        *args: Tensor,
        **kwargs: object,
    ) -> Tensor:
        r"""GPyTorch's hook: :meth:`expected_log_prob_answers` from a distribution.

        Args:
            observations: The first answer tensor (e.g. ``comparisons``).
            function_dist: A ``MultivariateNormal`` over ``batch_shape x n``
                latents (single utility, or ``d = 1``) or a
                ``MultitaskMultivariateNormal`` over ``batch_shape x n x d``.
            *args: The remaining answer tensors.
            **kwargs: Passed on (e.g. ``num_samples``).

        Returns:
            A ``batch_shape x k`` tensor.
        """
        mean, cov = self._dist_moments(function_dist)
        return self.expected_log_prob_answers(mean, cov, observations, *args, **kwargs)

    def log_marginal(
        self,
        observations: Tensor,
        function_dist: MultivariateNormal,
        *args: Tensor,
        **kwargs: object,
    ) -> Tensor:
        r"""GPyTorch's hook: :meth:`log_marginal_answers` from a distribution.

        Same arguments as :meth:`expected_log_prob`.

        Returns:
            A ``batch_shape x k`` tensor.
        """
        mean, cov = self._dist_moments(function_dist)
        return self.log_marginal_answers(mean, cov, observations, *args, **kwargs)

    def _dist_moments(self, function_dist: MultivariateNormal) -> tuple[Tensor, Tensor]:
        mean, cov = distribution_moments(function_dist)
        if mean.ndim == cov.ndim:  # multitask: batch x n x t
            if not self.multi_output:
                if mean.shape[-1] != 1:
                    raise InputDataError(
                        f"{type(self).__name__} has one utility per design; got a "
                        f"multitask distribution with {mean.shape[-1]} tasks."
                    )
                mean = mean.squeeze(-1)
        elif self.multi_output:
            mean = mean.unsqueeze(-1)  # batch x n x 1
        return mean, cov

    def forward(self, function_samples: Tensor, *answers: Tensor) -> Bernoulli:
        r"""Distribution of "the person gives these answers" given utilities.

        Args:
            function_samples: ``sample_shape x batch_shape x n x d`` utilities
                (``... x n`` for single-utility likelihoods).
            *answers: The answer tensors, as documented by the subclass.

        Returns:
            A ``Bernoulli`` of shape ``sample_shape x batch_shape x k`` whose
            success probability is ``p(answer_k | f)``.
        """
        logp = self.log_prob_answers(function_samples, *answers).clamp_max(0.0)
        # logit of p, finite even when p = 1 to working precision
        return Bernoulli(logits=(logp - log1mexp(logp)).clamp_max(40.0))
