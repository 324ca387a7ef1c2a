r"""Pairwise preference likelihoods (probit and logit).

Noise convention (``../SPEC.md`` §2 and §7): ``noise_std`` is σ, the noise on each
design's utility, so an answer "``w`` beats ``l``" has probability
``F((f_w - f_l) / s)`` with ``s = √2·σ``. BoTorch's ``PairwiseProbitLikelihood``
is the probit with σ = 1 (its ``Φ((f_w - f_l)/√2)``); BoTorch's
``PairwiseLogitLikelihood`` is ``sigmoid(f_w - f_l)``, i.e. the logit with
``s = 1`` (σ = 1/√2). :func:`as_prefbo_likelihood` converts both exactly.

Unlike BoTorch, nothing is clamped: BoTorch evaluates its probit gradient and
Hessian at ``z`` clamped to ``[-3, 3]`` (logit: ``[-8, 8]``), which biases the
Laplace mode whenever an answer is decisive. prefbo evaluates ``log Φ``, the
inverse Mills ratio and the curvature stably for every finite ``z``
(:mod:`prefbo.utils.normal`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch
from gpytorch.likelihoods import Likelihood
from torch import Tensor
from torch.distributions import Bernoulli

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.utils.normal import logit_terms, probit_terms


def _gauss_hermite(
    num: int, dtype: torch.dtype, device: torch.device
) -> tuple[Tensor, Tensor]:
    r"""Nodes and weights for ``E[h(Z)]``, ``Z ~ N(0, 1)``."""
    import numpy as np

    x, w = np.polynomial.hermite_e.hermegauss(num)
    return (
        torch.as_tensor(x, dtype=dtype, device=device),
        torch.as_tensor(w / w.sum(), dtype=dtype, device=device),
    )


class PairwiseLikelihood(Likelihood, ABC):
    r"""Base class of likelihoods for "design ``w`` beats design ``l``" answers.

    Subclasses implement :meth:`_terms`, the log-probability of an answer as a
    function of ``z = (f_w - f_l) / s`` and its first three derivatives. The
    Laplace and EP machinery only reads :meth:`derivatives`.
    """

    def __init__(self, noise_std: float = 1.0) -> None:
        r"""
        Args:
            noise_std: σ, the standard deviation of the noise on each design's
                utility (fixed, not learned: only ``outputscale / σ²`` is
                identifiable from comparisons). Differences are scaled by
                ``s = √2·σ``.
        """
        super().__init__(max_plate_nesting=1)
        noise_std = float(noise_std)
        if not math.isfinite(noise_std) or noise_std <= 0:
            raise InputDataError(
                f"noise_std must be a finite positive float; got {noise_std=}."
            )
        self.noise_std = noise_std

    @property
    def scale(self) -> float:
        r"""``s = √2·σ``, the scale of a utility difference."""
        return math.sqrt(2.0) * self.noise_std

    @abstractmethod
    def _terms(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        r"""``(log F(z), d/dz log F, -d²/dz² log F, -d³/dz³ log F)`` elementwise."""

    def derivatives(
        self, utility: Tensor, comparisons: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        r"""Log-likelihood of each answer and its derivatives in the difference.

        Computed in float64 whatever the input dtype (an elementwise cost of
        ``O(m)``), then cast back.

        Args:
            utility: A ``batch_shape x n`` tensor of utilities at the designs.
            comparisons: A ``batch_shape x m x 2`` long tensor, rows ``[w, l]``.

        Returns:
            A tuple of four ``batch_shape x m`` tensors: ``log p_k``, its first
            derivative in ``Δ_k = f_w - f_l``, the negative second derivative
            (``≥ 0``) and the negative third derivative.
        """
        s = self.scale
        delta = utility.gather(-1, comparisons[..., 0]) - utility.gather(
            -1, comparisons[..., 1]
        )  # batch x m
        logp, d1, w, dw = self._terms(delta.to(torch.float64) / s)
        dtype = utility.dtype
        return (
            logp.to(dtype),
            (d1 / s).to(dtype),
            (w / s**2).to(dtype),
            (dw / s**3).to(dtype),
        )

    def log_prob_answers(self, utility: Tensor, comparisons: Tensor) -> Tensor:
        r"""Exact log-probability of each answer given the utilities.

        Args:
            utility: A ``batch_shape x n`` tensor of utilities at the designs.
            comparisons: A ``batch_shape x m x 2`` long tensor, rows ``[w, l]``.

        Returns:
            A ``batch_shape x m`` tensor of ``log p(w ≻ l | f)``.
        """
        delta = utility.gather(-1, comparisons[..., 0]) - utility.gather(
            -1, comparisons[..., 1]
        )
        return self._log_prob(delta / self.scale)

    def _log_prob(self, z: Tensor) -> Tensor:
        r"""``log F(z)`` alone (override when cheaper than :meth:`_terms`)."""
        return self._terms(z)[0]

    def forward(self, function_samples: Tensor, comparisons: Tensor) -> Bernoulli:
        r"""Distribution of the answers given sampled utilities.

        Args:
            function_samples: A ``sample_shape x batch_shape x n`` tensor of
                utilities at the designs.
            comparisons: A ``batch_shape x m x 2`` long tensor of ``[i, j]`` rows.

        Returns:
            A ``Bernoulli`` of shape ``sample_shape x batch_shape x m`` whose
            success is "design ``i`` is preferred to design ``j``".
        """
        comparisons = comparisons.expand(
            function_samples.shape[:-1] + comparisons.shape[-2:]
        )
        return Bernoulli(logits=self._logits(function_samples, comparisons))

    def predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        r"""``E[p(answer | Δ)]`` for a Gaussian utility difference ``Δ ~ N(mean, var)``.

        The base implementation uses 40-point Gauss–Hermite quadrature; the
        probit overrides it with the closed form.

        Args:
            mean: Difference means, any shape.
            var: Difference variances (``≥ 0``), same shape.

        Returns:
            Probabilities of ``mean``'s shape.
        """
        nodes, weights = _gauss_hermite(40, mean.dtype, mean.device)
        delta = mean.unsqueeze(-1) + var.clamp_min(0).sqrt().unsqueeze(-1) * nodes
        logp = self._log_prob(delta / self.scale)
        return (logp.exp() * weights).sum(-1)

    def _logits(self, utility: Tensor, comparisons: Tensor) -> Tensor:
        logp = self.log_prob_answers(utility, comparisons)
        log1mp = self.log_prob_answers(utility, comparisons.flip(-1))
        return logp - log1mp


class PairwiseProbitLikelihood(PairwiseLikelihood):
    r"""Thurstone case V: ``p(w ≻ l | f) = Φ((f_w - f_l) / (√2·σ))``."""

    def _terms(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return probit_terms(z)

    def _log_prob(self, z: Tensor) -> Tensor:
        return torch.special.log_ndtr(z)

    def predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        r"""Closed form ``Φ(mean / √(s² + var))``."""
        return torch.special.ndtr(mean / (self.scale**2 + var.clamp_min(0)).sqrt())


class PairwiseLogitLikelihood(PairwiseLikelihood):
    r"""Bradley–Terry: ``p(w ≻ l | f) = sigmoid((f_w - f_l) / (√2·σ))``."""

    def _terms(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return logit_terms(z)

    def _log_prob(self, z: Tensor) -> Tensor:
        return torch.nn.functional.logsigmoid(z)


def as_prefbo_likelihood(likelihood: object | None) -> PairwiseLikelihood:
    r"""Return a prefbo pairwise likelihood for ``likelihood``.

    ``None`` gives the default probit (σ = 1). BoTorch's
    ``PairwiseProbitLikelihood`` maps to the probit with σ = 1 and BoTorch's
    ``PairwiseLogitLikelihood`` to the logit with σ = 1/√2 (``s = 1``), so the
    probabilities are the same functions of the utilities (without BoTorch's
    clamping).

    Args:
        likelihood: ``None``, a prefbo ``PairwiseLikelihood`` or a BoTorch
            pairwise likelihood.

    Returns:
        A ``PairwiseLikelihood``.
    """
    if likelihood is None:
        return PairwiseProbitLikelihood()
    if isinstance(likelihood, PairwiseLikelihood):
        return likelihood
    from botorch.models.likelihoods import pairwise as bt

    if isinstance(likelihood, bt.PairwiseProbitLikelihood):
        return PairwiseProbitLikelihood(noise_std=1.0)
    if isinstance(likelihood, bt.PairwiseLogitLikelihood):
        return PairwiseLogitLikelihood(noise_std=1.0 / math.sqrt(2.0))
    raise InputTypeError(
        "likelihood must be None, a prefbo PairwiseLikelihood or BoTorch's "
        "PairwiseProbitLikelihood / PairwiseLogitLikelihood; got "
        f"{type(likelihood).__name__}."
    )
