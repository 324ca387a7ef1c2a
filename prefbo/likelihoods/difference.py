r"""Likelihoods whose answers each depend on one utility difference.

Pairwise comparisons (probit, logit), just-noticeable differences and paired
label comparisons all score an answer by one difference ``Δ`` of two latent
values, so their Gaussian expectations are one-dimensional:
Gauss–Hermite on ``Δ``'s marginal, or a closed form.
"""

from __future__ import annotations

from abc import abstractmethod

from torch import Tensor

from prefbo.likelihoods.base import AnswerIndex, PreferenceLikelihood
from prefbo.likelihoods.quadrature import gaussian_expectation_1d


class DifferenceLikelihood(PreferenceLikelihood):
    r"""Likelihoods whose answers each depend on one utility difference.

    :meth:`_index` returns ``p = 2`` latents per answer, ``(first, second)``;
    subclasses implement :meth:`_log_prob_difference` of
    ``Δ = first - second``. Expected log-likelihoods use Gauss–Hermite on
    ``Δ``'s Gaussian marginal (``num_points`` nodes); log marginals use
    :meth:`_log_marginal_difference`, which subclasses override with closed
    forms where they exist (plain Gauss–Hermite is inaccurate for unlikely
    answers when ``Δ``'s standard deviation is well above the noise scale
    ``s``, see :func:`~prefbo.likelihoods.quadrature.gaussian_expectation_1d`).
    """

    @abstractmethod
    def _log_prob_difference(self, delta: Tensor, index: AnswerIndex) -> Tensor:
        r"""Map ``... x k`` differences to ``... x k`` answer log-probabilities."""

    def _log_prob_latents(self, latents: Tensor, index: AnswerIndex) -> Tensor:
        return self._log_prob_difference(latents[..., 0] - latents[..., 1], index)

    def _expectation(
        self,
        mean: Tensor,
        covariance: Tensor,
        index: AnswerIndex,
        num_samples: int,
        log_mean_exp: bool,
    ) -> Tensor:
        mean_diff = mean[..., 0] - mean[..., 1]  # batch x k
        var_diff = (
            covariance[..., 0, 0] + covariance[..., 1, 1] - 2 * covariance[..., 0, 1]
        ).clamp_min(0.0)
        if log_mean_exp:
            return self._log_marginal_difference(mean_diff, var_diff, index)
        return gaussian_expectation_1d(
            lambda delta: self._log_prob_difference(delta, index),
            mean_diff,
            var_diff,
            num_points=self.num_points,
        )

    def _log_marginal_difference(
        self, mean_diff: Tensor, var_diff: Tensor, index: AnswerIndex
    ) -> Tensor:
        r"""``log E[p(answer_k | Δ_k)]``, ``Δ_k ~ N(mean_diff, var_diff)``.

        The default is Gauss–Hermite on the log-sum-exp (``num_points``
        nodes); override with a closed form where one exists.

        Args:
            mean_diff: A ``batch_shape x k`` tensor of difference means.
            var_diff: A ``batch_shape x k`` tensor of difference variances.
            index: The answers' :class:`AnswerIndex`.

        Returns:
            A ``batch_shape x k`` tensor.
        """
        return gaussian_expectation_1d(
            lambda delta: self._log_prob_difference(delta, index),
            mean_diff,
            var_diff,
            num_points=self.num_points,
            log_mean_exp=True,
        )
